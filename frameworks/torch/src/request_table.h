// The one record of a torch request in flight, and the one table of them.
//
// A request is added before it is handed to the core and taken out by the thread that
// collects its result. The core's completion callback (on its own thread) only records the
// outcome and wakes a waiter, if any; the tensors are dropped by the collecting thread.
// A waiter sleeps at once rather than polling: ranks often outnumber free cores, and a
// polling waiter takes the core that the core's thread (or a peer rank) needs.
#ifndef TUTTI_TORCH_REQUEST_TABLE_H_
#define TUTTI_TORCH_REQUEST_TABLE_H_

#include <ATen/ATen.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "device_support.h"
#include "tutti/c_api.h"

namespace tutti_torch {

// Everything a request needs until it is collected: the tensors the core reads and writes,
// the integers it fills, and how it completed.
struct Request {
  // Waits up to timeout_seconds (negative: no limit); true once the request is done.
  bool Wait(double timeout_seconds);
  // Whether the core completed the request; Poll's answer. Not enough to destroy it.
  bool done() const { return done_.load(std::memory_order_acquire); }
  // done(), and the core's thread has left OnDone: the request may be destroyed.
  bool Finished();

  tutti_status status = TUTTI_OK;  // valid once done
  std::string error;               // the core's message, once done with an error
  std::vector<at::Tensor> inputs;
  std::vector<at::Tensor> outputs;  // given (allreduce, broadcast) or allocated
  std::vector<at::Tensor> allocation_buffers;
  std::vector<int32_t> splits;
  std::vector<int32_t> received_splits;
  int32_t result = -1;
  at::ScalarType dtype = at::kFloat;
  std::unique_ptr<DeviceRequest> device;

  // tutti_done_fn and tutti_allocate_fn of every request; user_data is the Request.
  static void OnDone(void* user_data, tutti_status status, const char* message);
  static void* Allocate(void* user_data, int32_t index, int32_t ndim, const int64_t* shape);

 private:
  std::atomic<bool> done_{false};
  std::mutex mutex_;
  std::condition_variable completed_;
};

class RequestTable {
 public:
  // The process-wide table. Never destroyed: the core may complete requests while static
  // destructors run at exit.
  static RequestTable& Instance();

  // Registers a request and returns its handle (positive, never reused).
  int64_t Add(std::shared_ptr<Request> request);
  // The request behind `handle`; Take also removes it. Both fail (InvalidArgumentError) for
  // a handle that was never returned or was already synchronized.
  std::shared_ptr<Request> Find(int64_t handle);
  std::shared_ptr<Request> Take(int64_t handle);

 private:
  std::mutex mutex_;
  std::unordered_map<int64_t, std::shared_ptr<Request>> requests_;
  int64_t next_handle_ = 1;
};

}  // namespace tutti_torch

#endif  // TUTTI_TORCH_REQUEST_TABLE_H_
