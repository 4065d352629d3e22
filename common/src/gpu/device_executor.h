// Runs negotiated requests whose tensors live on a GPU. The strategy chain for each request:
// NCCL when it is loaded, selected (TUTTI_GPU_OPERATIONS) and able to run it (NcclOperations::
// Enabled), otherwise the staged path (copies through pinned host memory and the host
// executor). Created on the first device request; owned by the CollectiveExecutor.
#ifndef TUTTI_SRC_GPU_DEVICE_EXECUTOR_H_
#define TUTTI_SRC_GPU_DEVICE_EXECUTOR_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/transport.h"
#include "gpu/device_runtime.h"
#include "gpu/gpu_config.h"
#include "gpu/nccl_operations.h"
#include "gpu/staged_operations.h"
#include "requests/process_sets.h"
#include "requests/request.h"
#include "requests/request_queue.h"

namespace tutti {
namespace gpu {

class DeviceExecutor {
 public:
  // From the environment: TUTTI_DEVICE_RUNTIME, TUTTI_GPU_OPERATIONS, TUTTI_NUM_NCCL_STREAMS.
  static Status Create(Transport* transport, ProcessSetRegistry* sets, int rank,
                       std::unique_ptr<DeviceExecutor>* executor);
  // nccl may be null (no NCCL: everything is staged).
  DeviceExecutor(Transport* transport, ProcessSetRegistry* sets, int rank,
                 const GpuConfig& config, std::unique_ptr<DeviceRuntime> runtime,
                 const NcclApi* nccl);

  // The host executor's entry points, which the staged path runs on host copies.
  using HostAllreduce = std::function<Status(int32_t, const std::vector<const PendingOp*>&)>;
  using HostExecute = std::function<Status(const PendingOp&)>;

  // Allreduce requests of one set and one device, fused.
  Status Allreduce(int32_t set, const std::vector<const PendingOp*>& ops,
                   const HostAllreduce& host);
  Status Execute(const Response& response, const PendingOp& op, const HostExecute& host);
  void ForgetProcessSet(int32_t set);

  DeviceRuntime* runtime() { return runtime_.get(); }
  // How many collectives each path ran.
  int64_t nccl_collectives() const { return nccl_count_; }
  int64_t staged_collectives() const { return staged_count_; }

 private:
  std::unique_ptr<DeviceRuntime> runtime_;
  std::unique_ptr<NcclOperations> nccl_;  // null without NCCL
  StagedOperations staged_;
  int64_t nccl_count_ = 0;
  int64_t staged_count_ = 0;
};

// Validates `device` and records it in `op` (tutti_enqueue_on_device). A CUDA request fails
// here, naming what was tried, when the CUDA runtime cannot be loaded.
Status AttachDevice(const tutti_device* device, PendingOp* op);

}  // namespace gpu
}  // namespace tutti

#endif  // TUTTI_SRC_GPU_DEVICE_EXECUTOR_H_
