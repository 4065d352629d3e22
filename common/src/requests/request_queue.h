// Requests submitted on any thread and not yet completed. The background thread takes the
// metadata of new ones each cycle and later takes each request by name to execute it.
//
// A request's buffers (its name, tensor views, shapes) are allocated by the submitting
// thread. Freed on the core's thread after execution, each such free crossed between
// glibc's per-thread caches: the core's thread then took the submitting thread's arena lock
// per free, and the submitting thread found its own cache empty on every allocation. Both
// showed as a third of a small request's cost on either thread. So executed requests come
// back (Recycle) into spare map nodes, and the next Enqueue on a submitting thread frees one
// there as it reuses its node: the map's nodes are not freed at all while requests flow.
#ifndef TUTTI_SRC_REQUEST_QUEUE_H_
#define TUTTI_SRC_REQUEST_QUEUE_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/adaptive_mutex.h"
#include "base/status.h"
#include "requests/request.h"

namespace tutti {

// One tensor of a request on this rank.
struct TensorView {
  const void* input = nullptr;
  void* output = nullptr;  // null for the collectives that allocate their output
  std::vector<int64_t> shape;
};

// Where a request's tensors live on this rank (tutti_device without its size field).
struct DeviceSpec {
  tutti_device_type type = TUTTI_DEVICE_CPU;
  int32_t index = -1;
  void* ready_event = nullptr;
  void* done_event = nullptr;
  bool on_device() const { return type != TUTTI_DEVICE_CPU; }
};

// A request plus what is needed to execute and complete it on this rank.
struct PendingOp {
  RequestMeta meta;
  std::vector<TensorView> tensors;
  tutti_allocate_fn allocate = nullptr;
  int32_t* received_splits = nullptr;  // alltoall
  int32_t* result = nullptr;           // join: last rank; add_process_set: the new id
  tutti_done_fn done = nullptr;
  void* user_data = nullptr;
  std::chrono::steady_clock::time_point enqueued;  // for the timeline
  DeviceSpec device;
  // Set once done has been called: how a caller running cycles itself (Context::Run) knows
  // its request finished. Shared, because the caller may leave the request to the core's
  // thread and return before it does.
  std::shared_ptr<std::atomic<bool>> finished;

  void Complete(const Status& status) const {
    done(user_data, status.code(), status.ok() ? nullptr : status.message().c_str());
    if (finished) finished->store(true, std::memory_order_release);
  }
};

class RequestQueue {
 public:
  // Fails with INVALID_ARGUMENT when a request of the same name is in flight, or with the
  // closing status once Close() was called.
  Status Enqueue(PendingOp op);

  // Metadata of requests enqueued since the last call, in submission order.
  std::vector<RequestMeta> TakeNew();

  // Removes the in-flight request `name`; false when there is none.
  bool Take(const std::string& name, PendingOp* op);

  // Take() of names[i] into *ops[i] for every i, found[i] saying whether there was one, a
  // few dozen under each lock: a cycle takes all it executes without locking once per
  // request against the submitting threads.
  void TakeAll(const std::vector<const std::string*>& names, const std::vector<PendingOp*>& ops,
               std::vector<bool>* found);

  // Whether no request is in flight.
  bool Empty();

  // Whether requests were enqueued since the last TakeNew().
  bool HasNew();

  // Whether a request that TakeNew() already returned is still in flight (it waits for
  // other ranks).
  bool HasWaiting();

  // Executed requests (moved from), whose buffers a later Enqueue frees on its own thread.
  // Requests beyond the spare nodes are freed here. One caller at a time: the thread
  // running the cycle (cycles are serialised), which also owns recycling_.
  void Recycle(std::vector<PendingOp>* executed);

  // Refuses further requests with `reason` and returns all requests still in flight.
  std::vector<PendingOp> Close(const Status& reason);

  // How many map nodes are kept for reuse, at most (emptied plus holding executed requests).
  static constexpr size_t kMaxSpareNodes = 4096;

 private:
  struct Entry {
    PendingOp op;
    bool is_new = true;  // not yet returned by TakeNew()
  };
  using Map = std::unordered_map<std::string, Entry>;
  // A node for a new request: a spare one if any (its old request moved to *old, to be freed
  // by the caller after the lock), else a new one.
  Map::node_type SpareNode(PendingOp* old);
  bool TakeLocked(const std::string& name, PendingOp* op);  // mutex_ held

  AdaptiveMutex mutex_;  // taken in turns by submitting threads and the core's thread
  Map in_flight_;
  // Nodes taken out of in_flight_: emptied (their request moved to the core's thread) and
  // holding an executed request that the next Enqueue frees.
  std::vector<Map::node_type> emptied_;
  std::vector<Map::node_type> holding_executed_;
  std::vector<Map::node_type> recycling_;  // Recycle's, between its two locks
  // The new entries in submission order; map nodes do not move, so no name is copied.
  std::vector<Entry*> new_;
  bool closed_ = false;
  Status close_reason_;
};

}  // namespace tutti

#endif  // TUTTI_SRC_REQUEST_QUEUE_H_
