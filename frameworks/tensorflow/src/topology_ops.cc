// TuttiSize, TuttiRank, TuttiLocalSize, TuttiLocalRank: the job's topology as graph ops,
// evaluated when the graph runs (after init()) rather than when it is traced.
#include "status.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tutti/c_api.h"

namespace tutti {
namespace tensorflow_plugin {
namespace {

namespace tf = ::tensorflow;

using TopologyQuery = int (*)();

#define TUTTI_REGISTER_TOPOLOGY_OP(op_name, doc)      \
  REGISTER_OP(op_name)                                \
      .Output("value: int32")                         \
      .SetIsStateful()                                \
      .SetShapeFn(tf::shape_inference::ScalarShape) \
      .Doc(doc)

TUTTI_REGISTER_TOPOLOGY_OP("TuttiSize", "Number of tutti processes in the job.");
TUTTI_REGISTER_TOPOLOGY_OP("TuttiRank", "Index of this process in the job.");
TUTTI_REGISTER_TOPOLOGY_OP("TuttiLocalSize", "Number of tutti processes on this host.");
TUTTI_REGISTER_TOPOLOGY_OP("TuttiLocalRank", "Index of this process on its host.");

template <TopologyQuery query>
class TopologyOp : public tf::OpKernel {
 public:
  explicit TopologyOp(tf::OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(tf::OpKernelContext* context) override {
    int value = query();
    OP_REQUIRES_OK(context,
                   value < 0 ? FromTutti(TUTTI_ERR_NOT_INITIALIZED, tutti_last_error())
                             : absl::OkStatus());
    tf::Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, tf::TensorShape({}), &output));
    output->scalar<int32_t>()() = value;
  }
};

REGISTER_KERNEL_BUILDER(Name("TuttiSize").Device(tf::DEVICE_CPU), TopologyOp<tutti_size>);
REGISTER_KERNEL_BUILDER(Name("TuttiRank").Device(tf::DEVICE_CPU), TopologyOp<tutti_rank>);
REGISTER_KERNEL_BUILDER(Name("TuttiLocalSize").Device(tf::DEVICE_CPU),
                        TopologyOp<tutti_local_size>);
REGISTER_KERNEL_BUILDER(Name("TuttiLocalRank").Device(tf::DEVICE_CPU),
                        TopologyOp<tutti_local_rank>);

}  // namespace
}  // namespace tensorflow_plugin
}  // namespace tutti
