// Torch operators of tutti (library namespace `tutti`), calling the core through its C ABI.
//
// Every collective is asynchronous underneath: an *_async operator enqueues the request
// with the core and returns a handle; `poll` and `wait` look at the handle table, which
// the core's completion callback updates from its own thread without touching Python.
// The synchronous operators are an enqueue followed by a wait.
//
// Failures raise c10::Error (RuntimeError in Python) carrying the core's message; the
// tutti_status behind the latest failure on this thread is kept for `take_error_status`,
// so the Python layer can raise the matching tutti.common exception class.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "device_support.h"
#include "handle_table.h"
#include "request_support.h"
#include "tutti/c_api.h"

namespace tutti_torch {
namespace {

tutti_status Submit(c10::string_view name, const tutti_tensor& input, const tutti_tensor& output,
                    int64_t op, double prescale, double postscale, int64_t handle,
                    const DeviceRequest& device) {
  return SubmitNamed(name, "allreduce", TUTTI_GLOBAL_PROCESS_SET,
                     [&](const std::string& request_name) {
                       tutti_request r{};
                       r.name = request_name.c_str();
                       r.collective = TUTTI_OP_ALLREDUCE;
                       r.process_set = TUTTI_GLOBAL_PROCESS_SET;
                       r.num_tensors = 1;
                       r.inputs = &input;
                       r.outputs = &output;
                       r.reduce_op = static_cast<tutti_reduce_op>(op);
                       r.prescale = prescale;
                       r.postscale = postscale;
                       r.done = &HandleTable::OnDone;
                       r.user_data = HandleTable::UserData(handle);
                       return EnqueueOn(r, device);
                     });
}

// Hands an allreduce of `input` into `output` (both contiguous) to the core and returns its
// handle. The tensors stay referenced by the handle table until the request is synchronized.
int64_t EnqueueAllreduce(c10::string_view name, const at::Tensor& input, const at::Tensor& output,
                         int64_t op, double prescale, double postscale,
                         std::function<void()> on_success) {
  HandleTable& table = HandleTable::Instance();
  // CUDA: the ready event is recorded on the current stream now; synchronizing makes the
  // then-current stream wait for the core's done event before anything else runs.
  auto device = std::make_shared<DeviceRequest>(std::vector<at::Tensor>{input, output},
                                                "allreduce");
  auto keepalive = std::make_shared<std::tuple<at::Tensor, at::Tensor, std::shared_ptr<DeviceRequest>>>(
      input, output, device);
  std::function<void()> finish = on_success;
  if (device->on_device()) {
    finish = [device, on_success]() {
      device->WaitOnCurrentStream();
      if (on_success) on_success();
    };
  }
  int64_t handle = table.Add(std::move(keepalive), std::move(finish));
  TensorView in(input);
  TensorView out(output);
  tutti_status status = Submit(name, in.view, out.view, op, prescale, postscale, handle, *device);
  if (status != TUTTI_OK) {
    std::string message = tutti_last_error();
    table.Discard(handle);
    Fail(status, message);
  }
  return handle;
}

int64_t AllreduceAsyncInPlace(at::Tensor& tensor, c10::string_view name, int64_t op,
                              double prescale, double postscale) {
  CheckTensor(tensor, "allreduce_async_");
  if (tensor.is_contiguous()) {
    return EnqueueAllreduce(name, tensor, tensor, op, prescale, postscale, nullptr);
  }
  // Reduce a contiguous copy; the synchronizing thread copies the result back.
  at::Tensor staging = tensor.contiguous();
  at::Tensor target = tensor;
  return EnqueueAllreduce(name, staging, staging, op, prescale, postscale,
                          [target, staging]() mutable { target.copy_(staging); });
}

std::tuple<at::Tensor, int64_t> AllreduceAsync(const at::Tensor& tensor, c10::string_view name,
                                               int64_t op, double prescale, double postscale) {
  CheckTensor(tensor, "allreduce_async");
  at::Tensor input = tensor.contiguous();
  at::Tensor output = at::empty(input.sizes(), input.options());
  int64_t handle = EnqueueAllreduce(name, input, output, op, prescale, postscale, nullptr);
  return std::make_tuple(output, handle);
}

bool Poll(int64_t handle) {
  try {
    return HandleTable::Instance().Poll(handle);
  } catch (const std::out_of_range& error) {
    Fail(TUTTI_ERR_INVALID_ARGUMENT, error.what());
  }
}

// Returns false if the request is still running after timeout_seconds (negative: no
// limit); raises the request's error; otherwise finishes it on this thread.
bool Wait(int64_t handle, double timeout_seconds) {
  Outcome outcome;
  try {
    if (!HandleTable::Instance().Wait(handle, timeout_seconds, &outcome)) return false;
  } catch (const std::out_of_range& error) {
    Fail(TUTTI_ERR_INVALID_ARGUMENT, error.what());
  }
  if (outcome.status != TUTTI_OK) Fail(outcome.status, outcome.message);
  if (outcome.on_success) outcome.on_success();
  return true;
}

at::Tensor Allreduce(const at::Tensor& tensor, c10::string_view name, int64_t op,
                     double prescale, double postscale) {
  auto result = AllreduceAsync(tensor, name, op, prescale, postscale);
  Wait(std::get<1>(result), -1.0);
  return std::get<0>(result);
}

at::Tensor AllreduceInPlace(at::Tensor& tensor, c10::string_view name, int64_t op,
                            double prescale, double postscale) {
  Wait(AllreduceAsyncInPlace(tensor, name, op, prescale, postscale), -1.0);
  return tensor;
}

}  // namespace
}  // namespace tutti_torch

TORCH_LIBRARY(tutti, m) {
  // More operators (the general `enqueue`) are defined in request_ops.cc.
  // op: tutti_reduce_op (0 Average, 1 Sum, 2 Min, 3 Max, 4 Product); an empty name lets
  // the plugin name the request.
  m.def("allreduce_async(Tensor tensor, str name, int op, float prescale, float postscale)"
        " -> (Tensor, int)");
  m.def("allreduce_async_(Tensor(a!) tensor, str name, int op, float prescale,"
        " float postscale) -> int");
  m.def("allreduce(Tensor tensor, str name=\"\", int op=0, float prescale=1.0,"
        " float postscale=1.0) -> Tensor");
  m.def("allreduce_(Tensor(a!) tensor, str name=\"\", int op=0, float prescale=1.0,"
        " float postscale=1.0) -> Tensor(a!)");
  m.def("poll(int handle) -> bool", &tutti_torch::Poll);
  m.def("wait(int handle, float timeout_seconds=-1.0) -> bool", &tutti_torch::Wait);
  m.def("take_error_status() -> int", &tutti_torch::TakeErrorStatus);
}

// Registered for every backend: CUDA tensors run here too (device_support.h), and any other
// device reaches the kernel's own check (with a clear message) instead of a missing-kernel
// error from the dispatcher.
TORCH_LIBRARY_IMPL(tutti, CompositeExplicitAutograd, m) {
  m.impl("allreduce_async", TORCH_FN(tutti_torch::AllreduceAsync));
  m.impl("allreduce_async_", TORCH_FN(tutti_torch::AllreduceAsyncInPlace));
  m.impl("allreduce", TORCH_FN(tutti_torch::Allreduce));
  m.impl("allreduce_", TORCH_FN(tutti_torch::AllreduceInPlace));
}
