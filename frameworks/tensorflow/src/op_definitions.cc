// Definitions (names, attributes, shapes) of every TensorFlow op of tutti. The kernels are
// in collective_kernels.cc; gradients and the Python wrappers in tutti/tensorflow/ops.py.
//
// Every collective is stateful, so that TensorFlow never folds it into a constant (running
// it once while optimizing the graph) and never merges two that look alike. The Python
// wrappers exempt them from tf.function's chaining of stateful ops.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tutti {
namespace tensorflow_plugin {
namespace {

namespace tf = ::tensorflow;
using tf::shape_inference::InferenceContext;
using tf::shape_inference::ShapeHandle;

#define TUTTI_DTYPES \
  "T: {uint8, int8, uint16, int16, int32, int64, half, bfloat16, float, double, bool}"

// Attributes every request carries: its name across ranks (empty: the node name) and the
// id of its process set (0: every rank).
#define TUTTI_REQUEST_ATTRS .Attr("tensor_name: string = ''").Attr("process_set: int = 0")

// Attributes of the reducing collectives (allreduce, reducescatter).
#define TUTTI_REDUCE_ATTRS             \
  .Attr("reduce_op: int")              \
      .Attr("prescale_factor: float = 1.0") \
      .Attr("postscale_factor: float = 1.0")

// Each output has its input's shape.
absl::Status SameShapes(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, c->input(i));
  return absl::OkStatus();
}

// Each output has its input's shape except the first dimension, known only at run time.
absl::Status FirstDimensionUnknown(InferenceContext* c, int inputs) {
  for (int i = 0; i < inputs; ++i) {
    ShapeHandle input;
    TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(i), 1, &input));
    ShapeHandle output;
    TF_RETURN_IF_ERROR(c->ReplaceDim(input, 0, c->UnknownDim(), &output));
    c->set_output(i, output);
  }
  return absl::OkStatus();
}

absl::Status AllFirstDimensionsUnknown(InferenceContext* c) {
  return FirstDimensionUnknown(c, c->num_inputs());
}

REGISTER_OP("TuttiAllreduce")
    .Attr(TUTTI_DTYPES) TUTTI_REDUCE_ATTRS TUTTI_REQUEST_ATTRS
    .Input("tensor: T")
    .Output("sum: T")
    .SetIsStateful()
    .SetShapeFn(SameShapes)
    .Doc("Reduces a tensor over the ranks of a process set; every rank gets the result.");

REGISTER_OP("TuttiGroupedAllreduce")
    .Attr("N: int >= 1")
    .Attr(TUTTI_DTYPES) TUTTI_REDUCE_ATTRS TUTTI_REQUEST_ATTRS
    .Input("tensors: N * T")
    .Output("sums: N * T")
    .SetIsStateful()
    .SetShapeFn(SameShapes)
    .Doc("Reduces N tensors as one request.");

REGISTER_OP("TuttiAllgather")
    .Attr(TUTTI_DTYPES) TUTTI_REQUEST_ATTRS
    .Input("tensor: T")
    .Output("gathered: T")
    .SetIsStateful()
    .SetShapeFn(AllFirstDimensionsUnknown)
    .Doc("Concatenates the ranks' tensors along the first dimension, in rank order.");

REGISTER_OP("TuttiGroupedAllgather")
    .Attr("N: int >= 1")
    .Attr(TUTTI_DTYPES) TUTTI_REQUEST_ATTRS
    .Input("tensors: N * T")
    .Output("gathered: N * T")
    .SetIsStateful()
    .SetShapeFn(AllFirstDimensionsUnknown)
    .Doc("Allgathers N tensors as one request.");

REGISTER_OP("TuttiBroadcast")
    .Attr(TUTTI_DTYPES) TUTTI_REQUEST_ATTRS
    .Attr("root_rank: int")
    .Input("tensor: T")
    .Output("broadcast: T")
    .SetIsStateful()
    .SetShapeFn(SameShapes)
    .Doc("Every rank of the process set receives the tensor of root_rank (a global rank, a "
         "member of the set, as in Horovod).");

REGISTER_OP("TuttiAlltoall")
    .Attr(TUTTI_DTYPES) TUTTI_REQUEST_ATTRS
    .Input("tensor: T")
    .Input("splits: int32")
    .Output("received: T")
    .Output("received_splits: int32")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(FirstDimensionUnknown(c, 1));
      c->set_output(1, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    })
    .Doc(R"doc(
Sends splits[j] rows of the tensor to rank j of the process set (equal parts when splits
is empty) and returns what every rank sent here, in rank order, with the row counts.
)doc");

REGISTER_OP("TuttiReducescatter")
    .Attr(TUTTI_DTYPES) TUTTI_REDUCE_ATTRS TUTTI_REQUEST_ATTRS
    .Input("tensor: T")
    .Output("part: T")
    .SetIsStateful()
    .SetShapeFn(AllFirstDimensionsUnknown)
    .Doc("Reduces a tensor over the ranks; rank i keeps the i-th part of the first dimension.");

REGISTER_OP("TuttiGroupedReducescatter")
    .Attr("N: int >= 1")
    .Attr(TUTTI_DTYPES) TUTTI_REDUCE_ATTRS TUTTI_REQUEST_ATTRS
    .Input("tensors: N * T")
    .Output("parts: N * T")
    .SetIsStateful()
    .SetShapeFn(AllFirstDimensionsUnknown)
    .Doc("Reducescatters N tensors as one request.");

REGISTER_OP("TuttiJoin")
    .Output("last_rank: int32")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::ScalarShape)
    .Doc("Waits until every rank has joined; returns the global rank that joined last.");

REGISTER_OP("TuttiBarrier")
    .Attr("process_set: int = 0")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::NoOutputs)
    .Doc("Returns once every rank of the process set has reached the barrier.");

#define TUTTI_REGISTER_TOPOLOGY_OP(op_name, doc) \
  REGISTER_OP(op_name)                           \
      .Output("value: int32")                    \
      .SetIsStateful()                           \
      .SetShapeFn(tf::shape_inference::ScalarShape) \
      .Doc(doc)

// The process set's size (process_set 0: every rank), and whether this rank belongs to it.
TUTTI_REGISTER_TOPOLOGY_OP("TuttiSize", "Number of tutti processes in the process set.")
    .Attr("process_set: int = 0");
TUTTI_REGISTER_TOPOLOGY_OP("TuttiProcessSetIncluded",
                           "1 if this process belongs to the process set, else 0.")
    .Attr("process_set: int = 0");
TUTTI_REGISTER_TOPOLOGY_OP("TuttiRank", "Index of this process in the job.");
TUTTI_REGISTER_TOPOLOGY_OP("TuttiLocalSize", "Number of tutti processes on this host.");
TUTTI_REGISTER_TOPOLOGY_OP("TuttiLocalRank", "Index of this process on its host.");

}  // namespace
}  // namespace tensorflow_plugin
}  // namespace tutti
