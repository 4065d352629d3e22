// NCCL as a transport of the strategy chain for device tensors: allreduce (fused through a
// device fusion buffer with batched copies), allgather (uneven first dimensions), broadcast,
// alltoall and reducescatter (uneven parts), all on the core's own streams.
#ifndef TUTTI_SRC_GPU_NCCL_OPERATIONS_H_
#define TUTTI_SRC_GPU_NCCL_OPERATIONS_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "transport/transport.h"
#include "gpu/device_requests.h"
#include "gpu/device_runtime.h"
#include "gpu/gpu_config.h"
#include "gpu/nccl_communicators.h"
#include "requests/process_sets.h"
#include "requests/request.h"
#include "requests/request_queue.h"

namespace tutti {
namespace gpu {

class NcclOperations {
 public:
  NcclOperations(const NcclApi* nccl, DeviceRuntime* runtime, Transport* transport,
                 ProcessSetRegistry* sets, int rank, const GpuConfig& config);
  NcclOperations(const NcclOperations&) = delete;
  NcclOperations& operator=(const NcclOperations&) = delete;

  // Whether NCCL runs `collective` on these requests; when not, *why_not says why and the
  // next operation of the chain (staged) runs them. Decided only from negotiated facts, so
  // every member decides alike.
  bool Enabled(const Response& response, const PendingOp& op, std::string* why_not) const;

  Status Allreduce(int32_t set, const std::vector<const PendingOp*>& ops);
  Status Execute(const Response& response, const PendingOp& op);
  void ForgetProcessSet(int32_t set) { comms_.Forget(set); }

 private:
  struct Launch {
    int device = 0;
    int stream_index = 0;
    void* stream = nullptr;
    ncclComm comm = nullptr;
    int set_rank = 0;
    int set_size = 1;
  };
  Status Begin(int32_t set, const std::vector<const PendingOp*>& ops, Launch* launch);
  Status Allgather(const Response& response, const PendingOp& op, const Launch& l);
  Status Alltoall(const Response& response, const PendingOp& op, const Launch& l);
  Status Reducescatter(const PendingOp& op, const Launch& l);
  // Runs one reduction with `plan`'s op (creating and destroying a PreMulSum op if needed).
  template <typename Call>
  Status Reduce(const PendingOp& op, const Launch& l, int set_size, Call call);
  // Runs calls() (NCCL calls returning a Status) as one NCCL group.
  template <typename Calls>
  Status Grouped(Calls calls);
  Status Check(ncclResult result, const char* what) const;

  const NcclApi* nccl_;
  DeviceRuntime* runtime_;
  ProcessSetRegistry* sets_;
  const int rank_;
  const GpuConfig config_;
  NcclCommunicators comms_;
  std::map<int32_t, int> next_stream_;  // per set: members execute its collectives alike
  BufferCache<std::pair<int, int>> fusion_;  // per (device, stream)
};

}  // namespace gpu
}  // namespace tutti

#endif  // TUTTI_SRC_GPU_NCCL_OPERATIONS_H_
