// Runs negotiated requests on this rank: the copies, scaling, output allocation and the
// transport's data-plane calls for each collective. Called only from the background thread.
#ifndef TUTTI_SRC_COLLECTIVE_EXECUTION_H_
#define TUTTI_SRC_COLLECTIVE_EXECUTION_H_

#include <memory>
#include <vector>

#include "transport/transport.h"
#include "gpu/device_executor.h"
#include "base/counters.h"
#include "requests/process_sets.h"
#include "requests/request.h"
#include "requests/request_queue.h"
#include "base/status.h"
#include "base/timeline.h"

namespace tutti {

class CollectiveExecutor {
 public:
  CollectiveExecutor(Transport* transport, ProcessSetRegistry* sets, int rank,
                     Counters* counters, Timeline* timeline)
      : transport_(transport),
        sets_(sets),
        rank_(rank),
        counters_(counters),
        timeline_(timeline) {}

  // Executes an agreed response for this rank's request `op`.
  Status Execute(const Response& response, const PendingOp& op);

  // Executes agreed allreduce requests that share process set, dtype, op and scale factors
  // with one transport call (fusion); one status for all of them.
  Status ExecuteFusedAllreduce(int32_t set, const std::vector<const PendingOp*>& ops);

  // Takes part in an allreduce this rank did not submit because it joined: contributes zeros
  // of the negotiated dtype and sizes.
  Status ExecuteJoined(const Response& response);

 private:
  // The collective of `op` on host memory (device requests were staged or run elsewhere).
  Status ExecuteOnHost(const Response& response, const PendingOp& op);
  // The executor for device tensors, created by the first device request.
  Status Device(gpu::DeviceExecutor** device);
  Status Allreduce(const Response& response, const PendingOp& op, int set_size);
  Status Allgather(const Response& response, const PendingOp& op, int set_size);
  Status Broadcast(const Response& response, const PendingOp& op);
  Status Alltoall(const Response& response, const PendingOp& op, int set_size, int set_rank);
  Status Reducescatter(const Response& response, const PendingOp& op, int set_size,
                       int set_rank);
  Status AddProcessSet(const PendingOp& op);
  Status RemoveProcessSet(const PendingOp& op);
  // Calls the request's allocate callback for output `index`.
  Status Allocate(const PendingOp& op, int index, const std::vector<int64_t>& shape,
                  int64_t bytes, void** data);
  // Adasum-reduces `buffer` (tensors of `counts` elements back to back) over set `set`.
  Status Adasum(int32_t set, void* buffer, tutti_dtype dtype, const std::vector<int64_t>& counts);
  // A scratch buffer of at least `bytes`, reused across requests.
  char* Scratch(size_t bytes);
  // The fusion buffer, reused across cycles (fresh pages are several times slower to fill).
  char* FusionBuffer(size_t bytes);
  // Records a timeline span for each op.
  void Trace(const std::vector<const PendingOp*>& ops, const char* what,
             Timeline::Clock::time_point start, const std::string& args = "");

  Transport* transport_;
  ProcessSetRegistry* sets_;
  const int rank_;
  Counters* counters_;
  Timeline* timeline_;
  std::vector<char> scratch_;
  std::vector<char> fusion_;
  std::vector<char> adasum_scratch_;  // what Adasum receives from its peers
  std::unique_ptr<gpu::DeviceExecutor> device_;
};

}  // namespace tutti

#endif  // TUTTI_SRC_COLLECTIVE_EXECUTION_H_
