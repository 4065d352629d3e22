// HostRuntime: the DeviceRuntime on host memory, for running the device path without a GPU.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gpu/device_runtime.h"

namespace tutti {
namespace gpu {
namespace {

std::string Pointer(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

}  // namespace

Status HostRuntime::SetDevice(int device) {
  log_.push_back("device " + std::to_string(device));
  return Status::OK();
}

Status HostRuntime::Stream(int device, int index, void** stream) {
  auto& slot = streams_[std::make_pair(device, index)];
  if (!slot) slot.reset(new int(device * 1000 + index));
  *stream = slot.get();
  return Status::OK();
}

std::string HostRuntime::StreamName(void* stream) const {
  const int id = *static_cast<int*>(stream);
  return "s" + std::to_string(id / 1000) + "." + std::to_string(id % 1000);
}

Status HostRuntime::WaitEvent(void* stream, void* event) {
  log_.push_back("wait " + StreamName(stream) + " e:" + Pointer(event));
  return Status::OK();
}

Status HostRuntime::RecordEvent(void* event, void* stream) {
  log_.push_back("record " + StreamName(stream) + " e:" + Pointer(event));
  return Status::OK();
}

Status HostRuntime::Copy(void* stream, const std::vector<CopyItem>& copies) {
  size_t bytes = 0, count = 0;
  for (const CopyItem& c : copies) {
    if (c.bytes == 0) continue;
    std::memmove(c.dst, c.src, c.bytes);
    bytes += c.bytes;
    ++count;
  }
  if (count > 0) {
    log_.push_back("copy " + StreamName(stream) + " x" + std::to_string(count) + " " +
                   std::to_string(bytes) + "B");
  }
  return Status::OK();
}

Status HostRuntime::Synchronize(void* stream) {
  log_.push_back("sync " + StreamName(stream));
  return Status::OK();
}

Status HostRuntime::AllocateDevice(int device, size_t bytes, void** ptr) {
  (void)device;
  *ptr = std::malloc(bytes > 0 ? bytes : 1);
  return *ptr ? Status::OK() : Status::Internal("out of host memory");
}

void HostRuntime::FreeDevice(void* ptr) { std::free(ptr); }

Status HostRuntime::AllocatePinned(size_t bytes, void** ptr) { return AllocateDevice(0, bytes, ptr); }

void HostRuntime::FreePinned(void* ptr) { std::free(ptr); }

Status CreateDeviceRuntime(std::unique_ptr<DeviceRuntime>* runtime) {
  const char* value = std::getenv("TUTTI_DEVICE_RUNTIME");
  const std::string choice = value == nullptr ? "" : value;
  if (choice == "host") {
    runtime->reset(new HostRuntime());
    return Status::OK();
  }
  if (!choice.empty() && choice != "cuda") {
    return Status::InvalidArgument("TUTTI_DEVICE_RUNTIME='" + choice +
                                   "' is not one of: cuda, host");
  }
  std::string error;
  const CudaApi* cuda = Cuda(&error);
  if (cuda == nullptr) {
    return Status::Unsupported("a CUDA tensor arrived, but tutti " + error);
  }
  runtime->reset(new CudaRuntime(cuda));
  return Status::OK();
}

}  // namespace gpu
}  // namespace tutti
