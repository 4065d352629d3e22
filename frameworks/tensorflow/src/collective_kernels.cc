// Kernels of every tutti op (see op_definitions.cc). One asynchronous kernel serves all
// collectives: it describes its tensors to the core as one tutti_request and completes
// when the core's background thread calls back. Outputs whose shape is only known after
// the ranks have negotiated (allgather, alltoall, reducescatter) are allocated from the
// core's allocate callback, which runs on that thread before the data moves.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/types.h"
#include "tensorflow/core/platform/errors.h"
#include "tutti/c_api.h"

namespace tutti {
namespace tensorflow_plugin {
namespace {

namespace tf = ::tensorflow;

// The TensorFlow status for a failure the core reported; its class follows the core's
// code (FailedPrecondition for ranks that disagree or a missing init()).
absl::Status FromTutti(tutti_status status, const char* message) {
  if (status == TUTTI_OK) return absl::OkStatus();
  std::string text = message != nullptr && message[0] != '\0'
                         ? message
                         : "tutti reported status " + std::to_string(static_cast<int>(status));
  switch (status) {
    case TUTTI_ERR_NOT_INITIALIZED:
      if (text.find("init") == std::string::npos) {
        text += "; call hvd.init() (tutti.tensorflow.init()) first";
      }
      return absl::FailedPreconditionError(text);
    case TUTTI_ERR_INVALID_ARGUMENT: return absl::InvalidArgumentError(text);
    case TUTTI_ERR_UNSUPPORTED: return absl::UnimplementedError(text);
    case TUTTI_ERR_ABORTED: return absl::AbortedError(text);
    case TUTTI_ERR_INTERNAL: return absl::InternalError(text);
    default: return absl::FailedPreconditionError(text);
  }
}

absl::Status ToTuttiDtype(tf::DataType dtype, tutti_dtype* out) {
  switch (dtype) {
    case tf::DT_UINT8: *out = TUTTI_UINT8; break;
    case tf::DT_INT8: *out = TUTTI_INT8; break;
    case tf::DT_UINT16: *out = TUTTI_UINT16; break;
    case tf::DT_INT16: *out = TUTTI_INT16; break;
    case tf::DT_INT32: *out = TUTTI_INT32; break;
    case tf::DT_INT64: *out = TUTTI_INT64; break;
    case tf::DT_HALF: *out = TUTTI_FLOAT16; break;
    case tf::DT_BFLOAT16: *out = TUTTI_BFLOAT16; break;
    case tf::DT_FLOAT: *out = TUTTI_FLOAT32; break;
    case tf::DT_DOUBLE: *out = TUTTI_FLOAT64; break;
    case tf::DT_BOOL: *out = TUTTI_BOOL; break;
    default:
      return tf::errors::InvalidArgument("tutti does not support tensors of type ",
                                         tf::DataTypeString(dtype));
  }
  return absl::OkStatus();
}

// The core never accepts a NULL buffer; zero-element tensors point here (nothing is read
// or written through it).
alignas(64) char empty_buffer[64];

void* DataOf(const tf::Tensor& tensor) {
  if (tensor.NumElements() == 0) return empty_buffer;
  // The core only reads and writes the buffer, hence the const_cast.
  return const_cast<char*>(tensor.tensor_data().data());
}

// A request in flight: what the callbacks need, owned by the core's callbacks from
// enqueue until done (which deletes it).
struct Pending {
  tf::OpKernelContext* context = nullptr;
  tf::AsyncOpKernel::DoneCallback done;
  tutti_dtype dtype = TUTTI_FLOAT32;
  std::vector<std::vector<int64_t>> shapes;  // the views' shape arrays
  std::vector<tutti_tensor> inputs;
  std::vector<tutti_tensor> outputs;
  std::vector<int32_t> splits;
  int32_t* received_splits = nullptr;  // alltoall: the second output's buffer
  int32_t* result = nullptr;           // join: the output's buffer
  int32_t set_size = 0;

  tutti_tensor View(const tf::Tensor& tensor) {
    shapes.emplace_back();
    std::vector<int64_t>& shape = shapes.back();
    for (int i = 0; i < tensor.dims(); ++i) shape.push_back(tensor.dim_size(i));
    tutti_tensor view;
    view.data = DataOf(tensor);
    view.dtype = dtype;
    view.ndim = static_cast<int32_t>(shape.size());
    view.shape = shape.empty() ? nullptr : shape.data();
    return view;
  }
};

void OnDone(void* user_data, tutti_status status, const char* message) {
  std::unique_ptr<Pending> pending(static_cast<Pending*>(user_data));
  if (status != TUTTI_OK) pending->context->SetStatus(FromTutti(status, message));
  tf::AsyncOpKernel::DoneCallback done = std::move(pending->done);
  pending.reset();
  done();
}

// tutti_allocate_fn: output `index` of the op, of the negotiated shape.
void* Allocate(void* user_data, int32_t index, int32_t ndim, const int64_t* shape) {
  auto* pending = static_cast<Pending*>(user_data);
  tf::TensorShape output_shape;
  for (int32_t i = 0; i < ndim; ++i) {
    if (!output_shape.AddDimWithStatus(shape[i]).ok()) return nullptr;
  }
  tf::Tensor* output = nullptr;
  absl::Status status = pending->context->allocate_output(index, output_shape, &output);
  if (!status.ok()) {
    pending->context->SetStatus(status);
    return nullptr;
  }
  return DataOf(*output);
}

class CollectiveOp : public tf::AsyncOpKernel {
 public:
  CollectiveOp(tf::OpKernelConstruction* context, tutti_collective collective)
      : AsyncOpKernel(context), collective_(collective) {
    if (context->HasAttr("reduce_op")) {
      int reduce_op = 0;
      float prescale = 1.0f, postscale = 1.0f;
      OP_REQUIRES_OK(context, context->GetAttr("reduce_op", &reduce_op));
      OP_REQUIRES_OK(context, context->GetAttr("prescale_factor", &prescale));
      OP_REQUIRES_OK(context, context->GetAttr("postscale_factor", &postscale));
      OP_REQUIRES(context, reduce_op >= TUTTI_REDUCE_AVERAGE && reduce_op <= TUTTI_REDUCE_ADASUM,
                  tf::errors::InvalidArgument(type_string(), ": reduce_op must be 0 (average), ",
                                              "1 (sum), 2 (min), 3 (max), 4 (product) or 5 ",
                                              "(adasum), not ", reduce_op));
      reduce_op_ = static_cast<tutti_reduce_op>(reduce_op);
      prescale_ = prescale;
      postscale_ = postscale;
    }
    if (context->HasAttr("tensor_name")) {
      OP_REQUIRES_OK(context, context->GetAttr("tensor_name", &tensor_name_));
    }
    if (tensor_name_.empty()) tensor_name_ = name();
    if (context->HasAttr("process_set")) {
      OP_REQUIRES_OK(context, context->GetAttr("process_set", &process_set_));
    }
    if (context->HasAttr("root_rank")) {
      OP_REQUIRES_OK(context, context->GetAttr("root_rank", &root_rank_));
    }
  }

  void ComputeAsync(tf::OpKernelContext* context, DoneCallback done) override {
    auto pending = std::make_unique<Pending>();
    pending->context = context;
    int num_tensors = NumTensors(context);
    pending->shapes.reserve(2 * num_tensors);
    if (num_tensors > 0) {
      OP_REQUIRES_OK_ASYNC(context, ToTuttiDtype(context->input(0).dtype(), &pending->dtype),
                           done);
    }
    for (int i = 0; i < num_tensors; ++i) {
      pending->inputs.push_back(pending->View(context->input(i)));
    }
    OP_REQUIRES_OK_ASYNC(context, PrepareOutputs(context, pending.get()), done);

    tutti_request request{};
    request.name = tensor_name_.c_str();
    request.collective = collective_;
    request.process_set = process_set_;
    request.num_tensors = num_tensors;
    request.inputs = pending->inputs.empty() ? nullptr : pending->inputs.data();
    request.outputs = pending->outputs.empty() ? nullptr : pending->outputs.data();
    request.allocate = AllocatesOutputs() ? &Allocate : nullptr;
    request.reduce_op = reduce_op_;
    request.prescale = prescale_;
    request.postscale = postscale_;
    request.root_rank = root_rank_;
    request.splits = pending->splits.empty() ? nullptr : pending->splits.data();
    request.received_splits = pending->received_splits;
    request.result = pending->result;
    request.done = &OnDone;
    request.user_data = pending.get();
    pending->done = std::move(done);

    Pending* raw = pending.release();
    tutti_status status = tutti_enqueue(&request);
    if (status != TUTTI_OK) {
      // Not queued: the core will not call back, so finish here.
      std::unique_ptr<Pending> failed(raw);
      context->SetStatus(FromTutti(status, tutti_last_error()));
      DoneCallback failed_done = std::move(failed->done);
      failed.reset();
      failed_done();
    }
    // On success the request (and `context`) belong to the core's thread from here on.
  }

 private:
  int NumTensors(tf::OpKernelContext* context) const {
    switch (collective_) {
      case TUTTI_OP_JOIN:
      case TUTTI_OP_BARRIER: return 0;
      case TUTTI_OP_ALLTOALL: return 1;  // the second input holds the splits
      default: return context->num_inputs();
    }
  }

  bool AllocatesOutputs() const {
    return collective_ == TUTTI_OP_ALLGATHER || collective_ == TUTTI_OP_ALLTOALL ||
           collective_ == TUTTI_OP_REDUCESCATTER;
  }

  // Outputs known before negotiation: same-shaped results (reduced in place when
  // TensorFlow lets an output take over its input's buffer), alltoall's received splits
  // and join's result.
  absl::Status PrepareOutputs(tf::OpKernelContext* context, Pending* pending) {
    if (collective_ == TUTTI_OP_ALLREDUCE || collective_ == TUTTI_OP_BROADCAST) {
      for (int i = 0; i < context->num_inputs(); ++i) {
        tf::Tensor* output = nullptr;
        TF_RETURN_IF_ERROR(context->forward_input_or_allocate_output(
            {i}, i, context->input(i).shape(), &output));
        pending->outputs.push_back(pending->View(*output));
      }
    } else if (collective_ == TUTTI_OP_ALLTOALL) {
      int32_t set_size = process_set_ == TUTTI_GLOBAL_PROCESS_SET
                             ? tutti_size()
                             : tutti_process_set_size(process_set_);
      if (set_size < 0) {
        return FromTutti(process_set_ == TUTTI_GLOBAL_PROCESS_SET ? TUTTI_ERR_NOT_INITIALIZED
                                                                  : TUTTI_ERR_INVALID_ARGUMENT,
                         tutti_last_error());
      }
      const tf::Tensor& splits = context->input(1);
      if (splits.dims() != 1) {
        return tf::errors::InvalidArgument("alltoall splits must be a vector, got shape ",
                                           splits.shape().DebugString());
      }
      auto values = splits.vec<int32_t>();
      for (int64_t i = 0; i < splits.NumElements(); ++i) pending->splits.push_back(values(i));
      tf::Tensor* received = nullptr;
      TF_RETURN_IF_ERROR(context->allocate_output(1, tf::TensorShape({set_size}), &received));
      pending->received_splits = received->vec<int32_t>().data();
      // The core writes set-size entries; with size 0 it writes none.
      if (set_size == 0) pending->received_splits = nullptr;
    } else if (collective_ == TUTTI_OP_JOIN) {
      tf::Tensor* result = nullptr;
      TF_RETURN_IF_ERROR(context->allocate_output(0, tf::TensorShape({}), &result));
      pending->result = result->scalar<int32_t>().data();
    }
    return absl::OkStatus();
  }

  tutti_collective collective_;
  std::string tensor_name_;
  int process_set_ = TUTTI_GLOBAL_PROCESS_SET;
  int root_rank_ = 0;
  tutti_reduce_op reduce_op_ = TUTTI_REDUCE_SUM;
  double prescale_ = 1.0;
  double postscale_ = 1.0;
};

template <tutti_collective kCollective>
class CollectiveKernel : public CollectiveOp {
 public:
  explicit CollectiveKernel(tf::OpKernelConstruction* context)
      : CollectiveOp(context, kCollective) {}
};

#define TUTTI_REGISTER_COLLECTIVE(op_name, collective) \
  REGISTER_KERNEL_BUILDER(Name(op_name).Device(tf::DEVICE_CPU), CollectiveKernel<collective>)

TUTTI_REGISTER_COLLECTIVE("TuttiAllreduce", TUTTI_OP_ALLREDUCE);
TUTTI_REGISTER_COLLECTIVE("TuttiGroupedAllreduce", TUTTI_OP_ALLREDUCE);
TUTTI_REGISTER_COLLECTIVE("TuttiAllgather", TUTTI_OP_ALLGATHER);
TUTTI_REGISTER_COLLECTIVE("TuttiGroupedAllgather", TUTTI_OP_ALLGATHER);
TUTTI_REGISTER_COLLECTIVE("TuttiBroadcast", TUTTI_OP_BROADCAST);
TUTTI_REGISTER_COLLECTIVE("TuttiAlltoall", TUTTI_OP_ALLTOALL);
TUTTI_REGISTER_COLLECTIVE("TuttiReducescatter", TUTTI_OP_REDUCESCATTER);
TUTTI_REGISTER_COLLECTIVE("TuttiGroupedReducescatter", TUTTI_OP_REDUCESCATTER);
TUTTI_REGISTER_COLLECTIVE("TuttiJoin", TUTTI_OP_JOIN);
TUTTI_REGISTER_COLLECTIVE("TuttiBarrier", TUTTI_OP_BARRIER);

// ---- topology ----------------------------------------------------------------------

using TopologyQuery = int (*)();

// The job's topology as a graph op, evaluated when the graph runs (after init()) rather
// than when it is traced.
template <TopologyQuery query>
class TopologyOp : public tf::OpKernel {
 public:
  explicit TopologyOp(tf::OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(tf::OpKernelContext* context) override {
    int value = query();
    OP_REQUIRES_OK(context, value < 0 ? FromTutti(TUTTI_ERR_NOT_INITIALIZED, tutti_last_error())
                                      : absl::OkStatus());
    tf::Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, tf::TensorShape({}), &output));
    output->scalar<int32_t>()() = value;
  }
};

// The size of a process set, or whether this rank belongs to it: both need a set the core
// knows (and init()).
class ProcessSetOp : public tf::OpKernel {
 public:
  ProcessSetOp(tf::OpKernelConstruction* context, bool included)
      : OpKernel(context), included_(included) {
    OP_REQUIRES_OK(context, context->GetAttr("process_set", &process_set_));
  }

  void Compute(tf::OpKernelContext* context) override {
    int size = process_set_ == TUTTI_GLOBAL_PROCESS_SET ? tutti_size()
                                                        : tutti_process_set_size(process_set_);
    if (size < 0) {
      bool initialized = tutti_size() >= 0;
      OP_REQUIRES_OK(context,
                     initialized ? tf::errors::InvalidArgument("unknown process set id ",
                                                               process_set_)
                                 : FromTutti(TUTTI_ERR_NOT_INITIALIZED, tutti_last_error()));
    }
    int value = size;
    if (included_) {
      value = process_set_ == TUTTI_GLOBAL_PROCESS_SET ||
                      tutti_process_set_rank(process_set_) >= 0
                  ? 1
                  : 0;
    }
    tf::Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, tf::TensorShape({}), &output));
    output->scalar<int32_t>()() = value;
  }

 private:
  bool included_;
  int process_set_ = TUTTI_GLOBAL_PROCESS_SET;
};

template <bool kIncluded>
class ProcessSetKernel : public ProcessSetOp {
 public:
  explicit ProcessSetKernel(tf::OpKernelConstruction* context)
      : ProcessSetOp(context, kIncluded) {}
};

REGISTER_KERNEL_BUILDER(Name("TuttiSize").Device(tf::DEVICE_CPU), ProcessSetKernel<false>);
REGISTER_KERNEL_BUILDER(Name("TuttiProcessSetIncluded").Device(tf::DEVICE_CPU),
                        ProcessSetKernel<true>);
REGISTER_KERNEL_BUILDER(Name("TuttiRank").Device(tf::DEVICE_CPU), TopologyOp<tutti_rank>);
REGISTER_KERNEL_BUILDER(Name("TuttiLocalSize").Device(tf::DEVICE_CPU),
                        TopologyOp<tutti_local_size>);
REGISTER_KERNEL_BUILDER(Name("TuttiLocalRank").Device(tf::DEVICE_CPU),
                        TopologyOp<tutti_local_rank>);

}  // namespace
}  // namespace tensorflow_plugin
}  // namespace tutti
