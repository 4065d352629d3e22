// The device operations the GPU executor needs, behind an interface: CudaRuntime runs them on
// the CUDA runtime (loaded at run time); HostRuntime runs them on host memory in program order
// and logs them, so that the executor's stream and event ordering and the whole staged path are
// exercised on machines without a GPU (TUTTI_DEVICE_RUNTIME=host; for tests only).
//
// Ordering contract the executor relies on: operations on one stream run in the order they
// are issued; WaitEvent makes a stream wait for an event without blocking the host; only
// Synchronize blocks the calling (background) thread.
#ifndef TUTTI_SRC_GPU_DEVICE_RUNTIME_H_
#define TUTTI_SRC_GPU_DEVICE_RUNTIME_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpu/copy_plan.h"
#include "gpu/gpu_libraries.h"
#include "base/status.h"

namespace tutti {
namespace gpu {

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual const char* name() const = 0;
  // Makes `device` current on the calling thread.
  virtual Status SetDevice(int device) = 0;
  // The core's stream `index` on `device`, created on first use.
  virtual Status Stream(int device, int index, void** stream) = 0;
  // `stream` waits for the work recorded in `event` (a framework's event) before going on.
  virtual Status WaitEvent(void* stream, void* event) = 0;
  // Records the work issued so far on `stream` into `event`.
  virtual Status RecordEvent(void* event, void* stream) = 0;
  // Issues the copies on `stream` (any memory, pageable host memory included).
  virtual Status Copy(void* stream, const std::vector<CopyItem>& copies) = 0;
  // Copies between device buffers (fusion), in as few calls as the runtime allows.
  virtual Status CopyOnDevice(void* stream, const std::vector<CopyItem>& copies) {
    return Copy(stream, copies);
  }
  // Blocks the calling thread until `stream` has finished its work.
  virtual Status Synchronize(void* stream) = 0;
  virtual Status AllocateDevice(int device, size_t bytes, void** ptr) = 0;
  virtual void FreeDevice(void* ptr) = 0;
  // Page-locked host memory (fast, asynchronous copies).
  virtual Status AllocatePinned(size_t bytes, void** ptr) = 0;
  virtual void FreePinned(void* ptr) = 0;
};

// CUDA: streams are non-blocking (they never synchronize with the legacy default stream).
class CudaRuntime : public DeviceRuntime {
 public:
  explicit CudaRuntime(const CudaApi* cuda) : cuda_(cuda) {}
  ~CudaRuntime() override;
  const char* name() const override { return "cuda"; }
  Status SetDevice(int device) override;
  Status Stream(int device, int index, void** stream) override;
  Status WaitEvent(void* stream, void* event) override;
  Status RecordEvent(void* event, void* stream) override;
  Status Copy(void* stream, const std::vector<CopyItem>& copies) override;
  Status CopyOnDevice(void* stream, const std::vector<CopyItem>& copies) override;
  Status Synchronize(void* stream) override;
  Status AllocateDevice(int device, size_t bytes, void** ptr) override;
  void FreeDevice(void* ptr) override;
  Status AllocatePinned(size_t bytes, void** ptr) override;
  void FreePinned(void* ptr) override;
  // Whether device copies go through cudaMemcpyBatchAsync (CUDA 13) rather than one call each.
  bool batched_copies() const { return cuda_->MemcpyBatchAsync != nullptr; }

 private:
  Status Check(cudaError error, const char* what) const;
  const CudaApi* cuda_;
  std::map<std::pair<int, int>, void*> streams_;
};

// Host memory as "device" memory; every operation runs at once and is appended to log().
class HostRuntime : public DeviceRuntime {
 public:
  const char* name() const override { return "host"; }
  Status SetDevice(int device) override;
  Status Stream(int device, int index, void** stream) override;
  Status WaitEvent(void* stream, void* event) override;
  Status RecordEvent(void* event, void* stream) override;
  Status Copy(void* stream, const std::vector<CopyItem>& copies) override;
  Status Synchronize(void* stream) override;
  Status AllocateDevice(int device, size_t bytes, void** ptr) override;
  void FreeDevice(void* ptr) override;
  Status AllocatePinned(size_t bytes, void** ptr) override;
  void FreePinned(void* ptr) override;
  // e.g. "wait s0.1 e:0x...", "copy s0.1 x3 96B", "record s0.1 e:0x...", "sync s0.1".
  const std::vector<std::string>& log() const { return log_; }

 private:
  std::string StreamName(void* stream) const;
  std::map<std::pair<int, int>, std::unique_ptr<int>> streams_;  // value: a stable address
  std::vector<std::string> log_;
};

// The runtime TUTTI_DEVICE_RUNTIME asks for: "cuda" (default) or "host".
Status CreateDeviceRuntime(std::unique_ptr<DeviceRuntime>* runtime);

}  // namespace gpu
}  // namespace tutti

#endif  // TUTTI_SRC_GPU_DEVICE_RUNTIME_H_
