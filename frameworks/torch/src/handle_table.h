// Handles of asynchronous collective requests made by the torch plugin.
//
// A request is registered before it is handed to the core; the core's completion callback
// (on the core's background thread) records the outcome and wakes waiters. The caller's
// thread collects the outcome with Wait(), which also drops the request's tensors there,
// never on the core's thread. Nothing here needs Python or torch.
#ifndef TUTTI_TORCH_HANDLE_TABLE_H_
#define TUTTI_TORCH_HANDLE_TABLE_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "tutti/c_api.h"

namespace tutti_torch {

// What a finished request leaves behind for the thread that synchronizes it.
struct Outcome {
  tutti_status status = TUTTI_OK;
  std::string message;
  // Runs on the synchronizing thread after success (e.g. copies a contiguous staging
  // buffer back into a non-contiguous tensor).
  std::function<void()> on_success;
  // Whatever must stay alive while the core works on the request (the tensors).
  std::shared_ptr<void> keepalive;
};

class HandleTable {
 public:
  // The process-wide table. It is never destroyed: the core may complete requests while
  // static destructors run at exit.
  static HandleTable& Instance();

  // Registers a new pending request and returns its handle (positive, never reused).
  int64_t Add(std::shared_ptr<void> keepalive, std::function<void()> on_success);

  // Forgets a request whose enqueueing failed (the core will not complete it).
  void Discard(int64_t handle);

  // tutti_done_fn for requests registered here; user_data is the handle.
  static void OnDone(void* user_data, tutti_status status, const char* message);
  static void* UserData(int64_t handle);

  // True once the request has completed (successfully or not). Fails for unknown handles.
  bool Poll(int64_t handle);

  // Waits up to timeout_seconds (forever if negative) for the request. Returns false if it
  // is still pending; otherwise removes the handle, stores its outcome and returns true.
  bool Wait(int64_t handle, double timeout_seconds, Outcome* outcome);

 private:
  struct Entry {
    bool done = false;
    Outcome outcome;
  };

  void Complete(int64_t handle, tutti_status status, const char* message);
  std::unordered_map<int64_t, Entry>::iterator Find(int64_t handle);

  std::mutex mutex_;
  std::condition_variable completed_;
  std::unordered_map<int64_t, Entry> entries_;
  int64_t next_handle_ = 1;
};

}  // namespace tutti_torch

#endif  // TUTTI_TORCH_HANDLE_TABLE_H_
