// Allreduce as an asynchronous operation of MXNet's dependency engine.
//
// Flow: Python pushes the operation (tutti_mxnet_allreduce_async); the engine runs
// RunAllreduce on a worker thread once the input is readable and the output writable;
// RunAllreduce hands the arrays to the core and returns at once; the core calls
// OnCoreDone from its background thread, which completes the engine operation, with an
// error when the core failed. The engine then releases the output to later readers, or
// raises the error (as MXNetError) in whoever waits on it.
#include <mxnet/base.h>
#include <mxnet/c_api.h>
#include <mxnet/engine.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "last_error.h"
#include "ndarray_view.h"
#include "ops.h"
#include "tutti/c_api.h"

namespace tutti_mxnet {
namespace {

// One pushed allreduce. The engine owns it (DeleteRequest is its deleter) and frees it
// when the operation has completed.
struct AllreduceRequest {
  std::string name;
  tutti_reduce_op op;
  double prescale;
  double postscale;
  // Our own NDArray handles sharing the arrays' storage: they keep the arrays valid
  // even when Python drops its objects before the operation has run.
  NDArrayHandle input = nullptr;
  NDArrayHandle output = nullptr;  // same as input for an in-place request
  // Copied when the engine runs the operation: the engine passes a pointer to a copy
  // that lives only for the duration of that call.
  mxnet::engine::CallbackOnComplete on_complete;
  // The error the operation completed with, shared with the pushing call: MXNet's
  // NaiveEngine runs the operation inside the push and drops the error it is given.
  std::shared_ptr<std::string> error = std::make_shared<std::string>();
};

void DeleteRequest(void* param) {
  auto* request = static_cast<AllreduceRequest*>(param);
  if (request->output != nullptr && request->output != request->input) {
    MXNDArrayFree(request->output);
  }
  if (request->input != nullptr) MXNDArrayFree(request->input);
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
// MXNetError in whoever reads the output. May free the request.
void CompleteWithError(AllreduceRequest* request, const std::string& message) {
  // The core's messages usually name the tensor already. The text before the first colon
  // must not look like an identifier, or MXNet takes it for the name of an error type.
  const std::string context = message.find("'" + request->name + "'") == std::string::npos
                                  ? "tutti allreduce '" + request->name + "' failed: "
                                  : "tutti allreduce failed: ";
  *request->error = context + message;
  const mxnet::engine::CallbackOnComplete on_complete = request->on_complete;
  const dmlc::Error error(*request->error);
  on_complete(&error);
}

// tutti_done_fn: runs on the core's background thread (exactly once per request).
void OnCoreDone(void* user_data, tutti_status status, const char* message) {
  auto* request = static_cast<AllreduceRequest*>(user_data);
  if (status != TUTTI_OK) {
    CompleteWithError(request, message != nullptr ? message : "the core reported no reason");
    return;
  }
  // Completing the operation lets the engine free the request: copy the callback first.
  const mxnet::engine::CallbackOnComplete on_complete = request->on_complete;
  on_complete();
}

// EngineAsyncFunc: runs on an engine worker thread when the arrays are ready.
void RunAllreduce(void* /*run_context*/, void* on_complete, void* param) {
  auto* request = static_cast<AllreduceRequest*>(param);
  request->on_complete = *static_cast<mxnet::engine::CallbackOnComplete*>(on_complete);

  std::string error;
  NDArrayView input;
  NDArrayView output;
  if (!input.Read(request->input, &error) || !output.Read(request->output, &error)) {
    CompleteWithError(request, error);
    return;
  }
  // From here on the core may complete (and free) the request on its own thread.
  const tutti_status status = tutti_allreduce_async(
      request->name.c_str(), input.tensor(), output.tensor(), request->op, request->prescale,
      request->postscale, &OnCoreDone, request);
  if (status != TUTTI_OK) {
    // The core did not take the request, so it will not call OnCoreDone.
    CompleteWithError(request, tutti_last_error());
  }
}

bool ValidOp(int op) { return op >= TUTTI_REDUCE_AVERAGE && op <= TUTTI_REDUCE_PRODUCT; }

}  // namespace
}  // namespace tutti_mxnet

extern "C" int tutti_mxnet_allreduce_async(NDArrayHandle input, NDArrayHandle output,
                                           const char* name, int op, double prescale,
                                           double postscale, int priority) {
  using namespace tutti_mxnet;
  if (input == nullptr || output == nullptr) return Fail("input and output must be NDArrays");
  if (name == nullptr || name[0] == '\0') return Fail("the allreduce needs a non-empty name");
  if (!ValidOp(op)) return Fail("unknown reduction op " + std::to_string(op));

  auto* request = new AllreduceRequest();
  request->name = name;
  request->op = static_cast<tutti_reduce_op>(op);
  request->prescale = prescale;
  request->postscale = postscale;
  if (MXShallowCopyNDArray(input, &request->input) != 0) {
    const std::string message = MXGetLastError();
    DeleteRequest(request);
    return Fail("cannot reference the input NDArray: " + message);
  }
  const bool in_place = input == output;
  if (in_place) {
    request->output = request->input;
  } else if (MXShallowCopyNDArray(output, &request->output) != 0) {
    const std::string message = MXGetLastError();
    DeleteRequest(request);
    return Fail("cannot reference the output NDArray: " + message);
  }
  const std::shared_ptr<const std::string> error = request->error;

  // The core works on host memory, so the operation always runs on a CPU worker. An
  // in-place request only mutates its array: the engine rejects a variable that is both
  // read and written by one operation.
  const mxnet::Context context = mxnet::Context::CPU();
  NDArrayHandle reads[1] = {request->input};
  NDArrayHandle writes[1] = {request->output};
  // Once MXNet has taken the request it owns it (DeleteRequest runs when the operation is
  // destroyed, also when pushing fails), so it is not freed here on failure.
  const int pushed = MXEnginePushAsyncND(&RunAllreduce, request, &DeleteRequest, &context,
                                         reads, in_place ? 0 : 1, writes, 1,
                                         /*prop_handle=*/nullptr, priority,
                                         "TuttiAllreduce", /*wait=*/false);
  if (pushed != 0) return Fail(std::string("MXNet refused the operation: ") + MXGetLastError());
  // A synchronous engine has already completed the operation and forgotten its error.
  if (EngineIsSynchronous() && !error->empty()) return Fail(*error);
  return 0;
}
