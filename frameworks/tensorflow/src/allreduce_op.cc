// TuttiAllreduce: an asynchronous TensorFlow op that hands its input to the tutti core and
// completes when the core's background thread reports the reduced result.
#include <string>
#include <utility>

#include "status.h"
#include "tensor_view.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tutti/c_api.h"

namespace tutti {
namespace tensorflow_plugin {
namespace {

namespace tf = ::tensorflow;

REGISTER_OP("TuttiAllreduce")
    .Attr("T: {uint8, int8, uint16, int16, int32, int64, half, bfloat16, float, double, bool}")
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("tensor_name: string = ''")
    .Input("tensor: T")
    .Output("sum: T")
    // Stateful, so that TensorFlow never folds the op into a constant (evaluating it once,
    // while optimizing the graph) and never merges two that look alike. The Python wrapper
    // exempts it from tf.function's serialization of stateful ops.
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::UnchangedShape)
    .Doc(R"doc(
Reduces a tensor across all tutti ranks; every rank receives the result.

tensor: the local contribution; same dtype and shape on every rank.
reduce_op: tutti_reduce_op (0 average, 1 sum, 2 min, 3 max, 4 product).
prescale_factor: multiplies the input before the reduction.
postscale_factor: multiplies the result after the reduction.
tensor_name: identifies the request across ranks; empty means the node name.
sum: the reduced tensor.
)doc");

// What the completion callback needs; deleted by it.
struct PendingAllreduce {
  tf::OpKernelContext* context;
  tf::AsyncOpKernel::DoneCallback done;
};

void OnAllreduceDone(void* user_data, tutti_status status, const char* message) {
  auto* pending = static_cast<PendingAllreduce*>(user_data);
  if (status != TUTTI_OK) pending->context->SetStatus(FromTutti(status, message));
  tf::AsyncOpKernel::DoneCallback done = std::move(pending->done);
  delete pending;
  done();
}

class TuttiAllreduceOp : public tf::AsyncOpKernel {
 public:
  explicit TuttiAllreduceOp(tf::OpKernelConstruction* context) : AsyncOpKernel(context) {
    int reduce_op = 0;
    float prescale = 1.0f, postscale = 1.0f;
    OP_REQUIRES_OK(context, context->GetAttr("reduce_op", &reduce_op));
    OP_REQUIRES_OK(context, context->GetAttr("prescale_factor", &prescale));
    OP_REQUIRES_OK(context, context->GetAttr("postscale_factor", &postscale));
    OP_REQUIRES_OK(context, context->GetAttr("tensor_name", &tensor_name_));
    OP_REQUIRES(context, reduce_op >= TUTTI_REDUCE_AVERAGE && reduce_op <= TUTTI_REDUCE_PRODUCT,
                tf::errors::InvalidArgument("TuttiAllreduce: reduce_op must be 0 (average), "
                                            "1 (sum), 2 (min), 3 (max) or 4 (product), not ",
                                            reduce_op));
    reduce_op_ = static_cast<tutti_reduce_op>(reduce_op);
    prescale_ = prescale;
    postscale_ = postscale;
    if (tensor_name_.empty()) tensor_name_ = name();
  }

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    const tf::Tensor& input = context->input(0);
    tutti_dtype dtype;
    OP_REQUIRES_OK_ASYNC(context, ToTuttiDtype(input.dtype(), &dtype), done);
    tf::Tensor* output = nullptr;
    // Reduce in place when TensorFlow lets the output reuse the input's buffer.
    OP_REQUIRES_OK_ASYNC(
        context, context->forward_input_or_allocate_output({0}, 0, input.shape(), &output),
        done);
    TensorView input_view(input, dtype);
    TensorView output_view(*output, dtype);
    auto* pending = new PendingAllreduce{context, std::move(done)};
    tutti_status status =
        tutti_allreduce_async(tensor_name_.c_str(), input_view.view(), output_view.view(),
                              reduce_op_, prescale_, postscale_, &OnAllreduceDone, pending);
    if (status != TUTTI_OK) {
      // Not queued: the core will not call back, so finish here.
      context->SetStatus(FromTutti(status, tutti_last_error()));
      DoneCallback failed = std::move(pending->done);
      delete pending;
      failed();
    }
  }

 private:
  std::string tensor_name_;
  tutti_reduce_op reduce_op_;
  double prescale_;
  double postscale_;
};

REGISTER_KERNEL_BUILDER(Name("TuttiAllreduce").Device(tf::DEVICE_CPU), TuttiAllreduceOp);

}  // namespace
}  // namespace tensorflow_plugin
}  // namespace tutti
