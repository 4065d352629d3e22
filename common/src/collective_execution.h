// Runs negotiated requests on this rank: the copies, scaling, output allocation and the
// controller's data-plane calls for each collective. Called only from the background thread.
#ifndef TUTTI_SRC_COLLECTIVE_EXECUTION_H_
#define TUTTI_SRC_COLLECTIVE_EXECUTION_H_

#include <vector>

#include "controller.h"
#include "process_sets.h"
#include "request.h"
#include "request_queue.h"
#include "status.h"

namespace tutti {

class CollectiveExecutor {
 public:
  CollectiveExecutor(Controller* controller, ProcessSetRegistry* sets, int rank)
      : controller_(controller), sets_(sets), rank_(rank) {}

  // Executes an agreed response for this rank's request `op`.
  Status Execute(const Response& response, const PendingOp& op);

  // Takes part in an allreduce this rank did not submit because it joined: contributes zeros
  // of the negotiated dtype and sizes.
  Status ExecuteJoined(const Response& response);

 private:
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
  // A scratch buffer of at least `bytes`, reused across requests.
  char* Scratch(size_t bytes);

  Controller* controller_;
  ProcessSetRegistry* sets_;
  const int rank_;
  std::vector<char> scratch_;
};

}  // namespace tutti

#endif  // TUTTI_SRC_COLLECTIVE_EXECUTION_H_
