// Collectives as asynchronous operations of MXNet's dependency engine.
//
// Flow: Python pushes the operation (tutti_mxnet_enqueue_async); the engine runs
// RunRequest on a worker thread once the inputs are readable and the outputs writable;
// RunRequest hands the arrays to the core and returns at once; the core calls OnCoreDone
// from its background thread, which completes the engine operation, with an error when
// the core failed. The engine then releases the outputs to later readers, or raises the
// error (as MXNetError) in whoever waits on them.
//
// Outputs always exist before the push (an engine operation cannot create or reshape an
// NDArray). For the collectives the core allocates, OnAllocate answers with the output's
// memory once it has checked that the shape the core negotiated is the one Python
// computed beforehand.
#include <mxnet/base.h>
#include <mxnet/c_api.h>
#include <mxnet/engine.h>
#include <mxnet/ndarray.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "last_error.h"
#include "ndarray_view.h"
#include "ops.h"
#include "tutti/c_api.h"

namespace tutti_mxnet {
namespace {

const char* CollectiveName(int collective) {
  switch (collective) {
    case TUTTI_OP_ALLREDUCE: return "allreduce";
    case TUTTI_OP_ALLGATHER: return "allgather";
    case TUTTI_OP_BROADCAST: return "broadcast";
    case TUTTI_OP_ALLTOALL: return "alltoall";
    case TUTTI_OP_REDUCESCATTER: return "reducescatter";
    default: return nullptr;
  }
}

bool CoreAllocates(int collective) {
  return collective == TUTTI_OP_ALLGATHER || collective == TUTTI_OP_ALLTOALL ||
         collective == TUTTI_OP_REDUCESCATTER;
}

// One pushed request. The engine owns it (DeleteRequest is its deleter) and frees it when
// the operation has completed.
struct Request {
  std::string name;
  tutti_collective collective;
  int32_t process_set = TUTTI_GLOBAL_PROCESS_SET;
  tutti_reduce_op op = TUTTI_REDUCE_SUM;
  double prescale = 1.0;
  double postscale = 1.0;
  int32_t root_rank = 0;
  std::vector<int32_t> splits;           // alltoall; empty for equal parts
  std::vector<int32_t> received_splits;  // alltoall; filled by the core
  // Our own NDArray handles sharing the arrays' storage: they keep the arrays valid even
  // when Python drops its objects before the operation has run. outputs[i] == inputs[i]
  // for an in-place tensor.
  std::vector<NDArrayHandle> inputs;
  std::vector<NDArrayHandle> outputs;
  // Views of the outputs, read when the engine runs the operation; OnAllocate hands out
  // their memory.
  std::vector<std::unique_ptr<NDArrayView>> output_views;
  std::string allocate_error;
  // Copied when the engine runs the operation: the engine passes a pointer to a copy that
  // lives only for the duration of that call.
  mxnet::engine::CallbackOnComplete on_complete;
  // The error the operation completed with, shared with the pushing call: MXNet's
  // NaiveEngine runs the operation inside the push and drops the error it is given.
  std::shared_ptr<std::string> error = std::make_shared<std::string>();
};

void DeleteRequest(void* param) {
  auto* request = static_cast<Request*>(param);
  for (size_t i = 0; i < request->outputs.size(); ++i) {
    const bool in_place = i < request->inputs.size() && request->outputs[i] == request->inputs[i];
    if (request->outputs[i] != nullptr && !in_place) MXNDArrayFree(request->outputs[i]);
  }
  for (NDArrayHandle input : request->inputs) {
    if (input != nullptr) MXNDArrayFree(input);
  }
  delete request;
}

// True when MXNet runs every operation synchronously inside the push (NaiveEngine, the
// debugging engine, chosen by the environment when MXNet starts).
bool EngineIsSynchronous() {
  static const bool synchronous = [] {
    const char* type = std::getenv("MXNET_ENGINE_TYPE");
    return type != nullptr && std::strcmp(type, "NaiveEngine") == 0;
  }();
  return synchronous;
}

// Completes the engine operation with `message` as its error; the engine raises it as
// MXNetError in whoever reads the outputs. May free the request.
void CompleteWithError(Request* request, const std::string& message) {
  // The core's messages usually name the tensor already. The text before the first colon
  // must not look like an identifier, or MXNet takes it for the name of an error type.
  const std::string kind = CollectiveName(request->collective);
  const std::string context = message.find("'" + request->name + "'") == std::string::npos
                                  ? "tutti " + kind + " '" + request->name + "' failed: "
                                  : "tutti " + kind + " failed: ";
  *request->error = context + message;
  const mxnet::engine::CallbackOnComplete on_complete = request->on_complete;
  const dmlc::Error error(*request->error);
  on_complete(&error);
}

std::string ShapeText(int32_t ndim, const int64_t* shape) {
  std::string text = "(";
  for (int32_t i = 0; i < ndim; ++i) {
    text += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return text + (ndim == 1 ? ",)" : ")");
}

// tutti_allocate_fn: runs on the core's background thread, before the collective.
void* OnAllocate(void* user_data, int32_t index, int32_t ndim, const int64_t* shape) {
  auto* request = static_cast<Request*>(user_data);
  if (index < 0 || index >= static_cast<int32_t>(request->output_views.size())) {
    request->allocate_error = "the core asked for output " + std::to_string(index);
    return nullptr;
  }
  const tutti_tensor* output = request->output_views[index]->tensor();
  bool same = output->ndim == ndim;
  for (int32_t i = 0; same && i < ndim; ++i) same = output->shape[i] == shape[i];
  if (!same) {
    request->allocate_error = "the negotiated output shape " + ShapeText(ndim, shape) +
                              " differs from the prepared " +
                              ShapeText(output->ndim, output->shape) +
                              " (did a rank change its tensor between calls?)";
    return nullptr;
  }
  return output->data;
}

// tutti_done_fn: runs on the core's background thread (exactly once per request).
void OnCoreDone(void* user_data, tutti_status status, const char* message) {
  auto* request = static_cast<Request*>(user_data);
  if (status != TUTTI_OK) {
    std::string reason = message != nullptr ? message : "the core reported no reason";
    if (!request->allocate_error.empty()) reason += " (" + request->allocate_error + ")";
    CompleteWithError(request, reason);
    return;
  }
  // Completing the operation lets the engine free the request: copy the callback first.
  const mxnet::engine::CallbackOnComplete on_complete = request->on_complete;
  on_complete();
}

// EngineAsyncFunc: runs on an engine worker thread when the arrays are ready.
void RunRequest(void* /*run_context*/, void* on_complete, void* param) {
  auto* request = static_cast<Request*>(param);
  request->on_complete = *static_cast<mxnet::engine::CallbackOnComplete*>(on_complete);

  const size_t count = request->inputs.size();
  std::string error;
  std::vector<NDArrayView> input_views(count);
  std::vector<tutti_tensor> inputs(count);
  std::vector<tutti_tensor> outputs(count);
  for (size_t i = 0; i < count; ++i) {
    request->output_views.emplace_back(new NDArrayView());
    if (!input_views[i].Read(request->inputs[i], &error) ||
        !request->output_views[i]->Read(request->outputs[i], &error)) {
      CompleteWithError(request, error);
      return;
    }
    inputs[i] = *input_views[i].tensor();
    outputs[i] = *request->output_views[i]->tensor();
  }
  const bool allocates = CoreAllocates(request->collective);
  if (request->collective == TUTTI_OP_ALLTOALL) {
    const int set_size = tutti_process_set_size(request->process_set);
    request->received_splits.assign(set_size > 0 ? set_size : 1, 0);
  }

  tutti_request core_request{};
  core_request.name = request->name.c_str();
  core_request.collective = request->collective;
  core_request.process_set = request->process_set;
  core_request.num_tensors = static_cast<int32_t>(count);
  core_request.inputs = inputs.data();
  core_request.outputs = allocates ? nullptr : outputs.data();
  core_request.allocate = allocates ? &OnAllocate : nullptr;
  core_request.reduce_op = request->op;
  core_request.prescale = request->prescale;
  core_request.postscale = request->postscale;
  core_request.root_rank = request->root_rank;
  core_request.splits = request->splits.empty() ? nullptr : request->splits.data();
  core_request.received_splits =
      request->received_splits.empty() ? nullptr : request->received_splits.data();
  core_request.done = &OnCoreDone;
  core_request.user_data = request;
  // From here on the core may complete (and free) the request on its own thread.
  if (tutti_enqueue(&core_request) != TUTTI_OK) {
    // The core did not take the request, so it will not call OnCoreDone.
    CompleteWithError(request, tutti_last_error());
  }
}

// The engine variable of an NDArray; arrays that share storage (views, slices, the same
// array passed twice) share it.
const void* EngineVar(NDArrayHandle array) {
  return static_cast<const mxnet::NDArray*>(array)->var();
}

// Keeps one handle per engine variable, dropping reads of variables that are also written:
// the engine waits forever on an operation that names a variable twice.
void Deduplicate(std::vector<NDArrayHandle>* reads, std::vector<NDArrayHandle>* writes) {
  std::unordered_set<const void*> seen;
  std::vector<NDArrayHandle> unique_writes;
  for (NDArrayHandle write : *writes) {
    if (seen.insert(EngineVar(write)).second) unique_writes.push_back(write);
  }
  std::vector<NDArrayHandle> unique_reads;
  for (NDArrayHandle read : *reads) {
    if (seen.insert(EngineVar(read)).second) unique_reads.push_back(read);
  }
  *writes = unique_writes;
  *reads = unique_reads;
}

bool ValidOp(int op) { return op >= TUTTI_REDUCE_AVERAGE && op <= TUTTI_REDUCE_ADASUM; }

// Takes our own reference to `array` (sharing its storage) into `*handle`.
bool Reference(NDArrayHandle array, const char* what, NDArrayHandle* handle) {
  if (MXShallowCopyNDArray(array, handle) != 0) {
    Fail(std::string("cannot reference the ") + what + " NDArray: " + MXGetLastError());
    return false;
  }
  return true;
}

}  // namespace
}  // namespace tutti_mxnet

extern "C" int tutti_mxnet_enqueue_async(int collective, const NDArrayHandle* inputs,
                                         const NDArrayHandle* outputs, int num_tensors,
                                         const char* name, int process_set, int op,
                                         double prescale, double postscale, int root_rank,
                                         const int32_t* splits, int num_splits, int priority) {
  using namespace tutti_mxnet;
  if (CollectiveName(collective) == nullptr) {
    return Fail("collective " + std::to_string(collective) + " takes no tensors or is unknown");
  }
  if (num_tensors < 1 || inputs == nullptr || outputs == nullptr) {
    return Fail("a collective needs at least one input and one output NDArray");
  }
  if (name == nullptr || name[0] == '\0') return Fail("the request needs a non-empty name");
  if (!ValidOp(op)) return Fail("unknown reduction op " + std::to_string(op));
  if (num_splits < 0 || (num_splits > 0 && splits == nullptr)) {
    return Fail("splits must hold num_splits entries");
  }

  auto* request = new Request();
  request->name = name;
  request->collective = static_cast<tutti_collective>(collective);
  request->process_set = process_set;
  request->op = static_cast<tutti_reduce_op>(op);
  request->prescale = prescale;
  request->postscale = postscale;
  request->root_rank = root_rank;
  if (num_splits > 0) request->splits.assign(splits, splits + num_splits);

  // The engine rejects a variable that is both read and written by one operation, so an
  // in-place tensor is only mutated.
  std::vector<NDArrayHandle> reads;
  std::vector<NDArrayHandle> writes;
  for (int i = 0; i < num_tensors; ++i) {
    if (inputs[i] == nullptr || outputs[i] == nullptr) {
      DeleteRequest(request);
      return Fail("input and output " + std::to_string(i) + " must be NDArrays");
    }
    NDArrayHandle input = nullptr;
    if (!Reference(inputs[i], "input", &input)) {
      DeleteRequest(request);
      return -1;
    }
    request->inputs.push_back(input);
    NDArrayHandle output = input;
    if (outputs[i] != inputs[i]) {
      if (!Reference(outputs[i], "output", &output)) {
        request->outputs.push_back(nullptr);
        DeleteRequest(request);
        return -1;
      }
      reads.push_back(input);
    }
    request->outputs.push_back(output);
    writes.push_back(output);
  }
  Deduplicate(&reads, &writes);
  const std::shared_ptr<const std::string> error = request->error;

  // The core works on host memory, so the operation always runs on a CPU worker. Once
  // MXNet has taken the request it owns it (DeleteRequest runs when the operation is
  // destroyed, also when pushing fails), so it is not freed here on failure.
  const mxnet::Context context = mxnet::Context::CPU();
  const int pushed = MXEnginePushAsyncND(
      &RunRequest, request, &DeleteRequest, &context, reads.empty() ? nullptr : reads.data(),
      static_cast<int>(reads.size()), writes.data(), static_cast<int>(writes.size()),
      /*prop_handle=*/nullptr, priority, "TuttiCollective", /*wait=*/false);
  if (pushed != 0) return Fail(std::string("MXNet refused the operation: ") + MXGetLastError());
  // A synchronous engine has already completed the operation and forgotten its error.
  if (EngineIsSynchronous() && !error->empty()) return Fail(*error);
  return 0;
}
