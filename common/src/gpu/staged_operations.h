// The staged path for device tensors: copy them to a pinned host buffer on the core's stream
// (after the framework's ready event), run the host collective on the copies, and copy the
// results back, recording each request's done event. Every collective and dtype works this way
// on any install (no NCCL, TUTTI_GPU_OPERATIONS=mpi|gloo, or what NCCL cannot run).
#ifndef TUTTI_SRC_GPU_STAGED_OPERATIONS_H_
#define TUTTI_SRC_GPU_STAGED_OPERATIONS_H_

#include <functional>
#include <vector>

#include "gpu/copy_plan.h"
#include "gpu/device_requests.h"
#include "gpu/device_runtime.h"
#include "requests/request_queue.h"
#include "base/status.h"

namespace tutti {
namespace gpu {

// Where each tensor of a staged request sits in the pinned buffer (inputs, in request order;
// allreduce and broadcast reduce in place there, so their outputs share the slot).
PackedLayout PlanStaging(const std::vector<const PendingOp*>& ops);

class StagedOperations {
 public:
  explicit StagedOperations(DeviceRuntime* runtime);
  StagedOperations(const StagedOperations&) = delete;
  StagedOperations& operator=(const StagedOperations&) = delete;

  // Runs `host_run` on host copies of `ops` (all on one device) and completes the device side:
  // outputs copied back and done events recorded, or the stream synchronized when a request
  // has no done event.
  using HostRun = std::function<Status(const std::vector<const PendingOp*>& host_ops)>;
  Status Run(const std::vector<const PendingOp*>& ops, const HostRun& host_run);

 private:
  DeviceRuntime* runtime_;
  BufferCache<int> pinned_;  // per device: each device's copies run on its own stream
};

}  // namespace gpu
}  // namespace tutti

#endif  // TUTTI_SRC_GPU_STAGED_OPERATIONS_H_
