#include "device_support.h"

#include <c10/core/impl/VirtualGuardImpl.h>

#include <string>

#include "request_support.h"

namespace tutti_torch {

DeviceRequest::DeviceRequest(const std::vector<at::Tensor>& inputs,
                             const std::vector<at::Tensor>& outputs, const char* op)
    : device_(at::kCPU) {
  if (inputs.empty() && outputs.empty()) return;
  device_ = (inputs.empty() ? outputs : inputs)[0].device();
  for (const std::vector<at::Tensor>* tensors : {&inputs, &outputs}) {
    for (const at::Tensor& t : *tensors) {
      if (t.device() != device_) {
        Fail(TUTTI_ERR_INVALID_ARGUMENT,
             std::string(op) + ": all tensors of a request must be on one device, got " +
                 device_.str() + " and " + t.device().str());
      }
    }
  }
  if (!device_.is_cuda()) return;
  if (tutti_c_api_minor_version() < 1) {
    Fail(TUTTI_ERR_UNSUPPORTED, std::string(op) +
                                    ": CUDA tensors need tutti-core with C API minor version 1; "
                                    "upgrade tutti-core");
  }
  c10::impl::VirtualGuardImpl guard(c10::DeviceType::CUDA);
  const c10::Stream current = guard.getStream(device_);
  ready_.reset(new c10::Event(c10::DeviceType::CUDA));
  ready_->record(current);
  // Recording creates the underlying cudaEvent_t; the core records it again on its stream.
  done_.reset(new c10::Event(c10::DeviceType::CUDA));
  done_->record(current);
  spec_.struct_size = sizeof(tutti_device);
  spec_.type = TUTTI_DEVICE_CUDA;
  spec_.index = device_.index();
  spec_.ready_event = ready_->eventId();
  spec_.done_event = done_->eventId();
}

void DeviceRequest::WaitOnCurrentStream() const {
  if (!on_device()) return;
  c10::impl::VirtualGuardImpl guard(c10::DeviceType::CUDA);
  done_->block(guard.getStream(device_));
}

tutti_status EnqueueOn(const tutti_request& request, const DeviceRequest& device) {
  return device.on_device() ? tutti_enqueue_on_device(&request, device.spec())
                            : tutti_enqueue(&request);
}

}  // namespace tutti_torch
