// Requests submitted on any thread and not yet completed. The background thread takes the
// metadata of new ones each cycle and later takes each request by name to execute it.
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
  // Fails with PRECONDITION when a request of the same name is in flight, or with the
  // closing status once Close() was called.
  Status Enqueue(PendingOp op);

  // Metadata of requests enqueued since the last call, in submission order.
  std::vector<RequestMeta> TakeNew();

  // Removes the in-flight request `name`; false when there is none.
  bool Take(const std::string& name, PendingOp* op);

  // Whether no request is in flight.
  bool Empty();

  // Whether requests were enqueued since the last TakeNew().
  bool HasNew();

  // Whether a request that TakeNew() already returned is still in flight (it waits for
  // other ranks).
  bool HasWaiting();

  // Refuses further requests with `reason` and returns all requests still in flight.
  std::vector<PendingOp> Close(const Status& reason);

 private:
  struct Entry {
    PendingOp op;
    bool is_new = true;  // not yet returned by TakeNew()
  };
  AdaptiveMutex mutex_;  // taken in turns by submitting threads and the core's thread
  std::unordered_map<std::string, Entry> in_flight_;
  // The new entries in submission order; map nodes do not move, so no name is copied.
  std::vector<Entry*> new_;
  bool closed_ = false;
  Status close_reason_;
};

}  // namespace tutti

#endif  // TUTTI_SRC_REQUEST_QUEUE_H_
