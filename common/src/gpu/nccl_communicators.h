// NCCL communicators, created lazily per (process set, device, stream), with the unique id
// sent from the set's rank 0 to its other members through the transport (MPI or Gloo) that
// negotiation already uses. Every member creates a communicator at the same point of the
// agreed execution order, so the collective creation cannot deadlock.
#ifndef TUTTI_SRC_GPU_NCCL_COMMUNICATORS_H_
#define TUTTI_SRC_GPU_NCCL_COMMUNICATORS_H_

#include <functional>
#include <map>
#include <tuple>

#include "transport/transport.h"
#include "gpu/cuda_decls.h"
#include "gpu/device_runtime.h"
#include "gpu/gpu_libraries.h"
#include "base/status.h"

namespace tutti {
namespace gpu {

// The set's rank 0 makes an id with make_id; every member of `set` leaves with rank 0's id.
// Collective over the set's members.
Status ExchangeUniqueId(Transport* transport, int32_t set, int set_rank,
                        const std::function<Status(NcclUniqueId*)>& make_id, NcclUniqueId* id);

class NcclCommunicators {
 public:
  NcclCommunicators(const NcclApi* nccl, Transport* transport, DeviceRuntime* runtime)
      : nccl_(nccl), transport_(transport), runtime_(runtime) {}
  ~NcclCommunicators();
  NcclCommunicators(const NcclCommunicators&) = delete;
  NcclCommunicators& operator=(const NcclCommunicators&) = delete;

  // The communicator of (set, device, stream), created on first use (collective over the set).
  Status Get(int32_t set, int set_rank, int set_size, int device, int stream, ncclComm* comm);
  // Drops the communicators of a removed process set.
  void Forget(int32_t set);

 private:
  Status Check(ncclResult result, const char* what) const;
  const NcclApi* nccl_;
  Transport* transport_;
  DeviceRuntime* runtime_;
  std::map<std::tuple<int32_t, int, int>, ncclComm> comms_;
};

}  // namespace gpu
}  // namespace tutti

#endif  // TUTTI_SRC_GPU_NCCL_COMMUNICATORS_H_
