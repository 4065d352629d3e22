// CUDA tensors for the native calls, through c10's device-generic Stream and Event (no CUDA
// headers: the same source builds against CPU and CUDA torch).
//
// A request on CUDA tensors records a ready event on the device's current stream (in backward
// hooks that is the gradient's stream), hands the core a done event to record on its own
// stream, and, when the request is synchronized, makes the caller's current stream wait for
// that event: neither the framework's stream nor the core's waits on the host.
#ifndef TUTTI_TORCH_DEVICE_SUPPORT_H_
#define TUTTI_TORCH_DEVICE_SUPPORT_H_

#include <ATen/ATen.h>
#include <c10/core/Event.h>

#include <memory>
#include <vector>

#include "tutti/c_api.h"

namespace tutti_torch {

class DeviceRequest {
 public:
  // The device of `inputs` and `outputs` (which must all share it; CPU or CUDA). For CUDA:
  // records the ready event now and prepares the done event. `op` names the operation in
  // errors.
  DeviceRequest(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
                const char* op);

  bool on_device() const { return device_.is_cuda(); }
  const c10::Device& device() const { return device_; }
  // The tutti_device for tutti_enqueue_on_device (valid while this object lives).
  const tutti_device* spec() const { return on_device() ? &spec_ : nullptr; }
  // After the request is done: the current stream of the device waits for the core's work.
  void WaitOnCurrentStream() const;

 private:
  c10::Device device_;
  std::unique_ptr<c10::Event> ready_;
  std::unique_ptr<c10::Event> done_;
  tutti_device spec_{};
};

// Enqueues `request` on the device of `device` (host memory for CPU).
tutti_status EnqueueOn(const tutti_request& request, const DeviceRequest& device);

}  // namespace tutti_torch

#endif  // TUTTI_TORCH_DEVICE_SUPPORT_H_
