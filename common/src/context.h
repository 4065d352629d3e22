// The core's state between init and shutdown: the controller, the request queue and the
// background thread that negotiates and executes requests.
#ifndef TUTTI_SRC_CONTEXT_H_
#define TUTTI_SRC_CONTEXT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "collective_execution.h"
#include "config.h"
#include "controller.h"
#include "negotiation.h"
#include "process_sets.h"
#include "request_queue.h"
#include "status.h"

namespace tutti {

class Context {
 public:
  // Connects the configured controller (blocking until all ranks joined) and starts the
  // background thread.
  static Status Create(const Config& config, std::unique_ptr<Context>* context);

  // Shuts down if Shutdown() was not called.
  ~Context();

  // Asks every rank to stop (through negotiation), waits for the background thread, fails
  // requests still pending with ABORTED and releases the transport. Idempotent.
  void Shutdown();

  // Queues a request; `op.done` is called exactly once if this returns OK.
  Status Enqueue(PendingOp op);

  // Collective over every rank: registers a process set (blocking until every rank did, or
  // until the configured timeout) and writes its id.
  Status AddProcessSet(const std::vector<int32_t>& ranks, int32_t* id);
  Status RemoveProcessSet(int32_t id);

  const ProcessSetRegistry& process_sets() const { return process_sets_; }

  // Copies taken at creation: valid from any thread, even while Shutdown() releases the
  // controller.
  const Topology& topology() const { return topology_; }
  const char* controller_name() const { return controller_name_; }
  int64_t background_thread_id() const { return thread_id_.load(); }

 private:
  Context(const Config& config, std::unique_ptr<Controller> controller);

  void Loop();
  // Waits until the next cycle should start; false when the loop should stop instead.
  void WaitForCycle(std::chrono::steady_clock::time_point cycle_start);
  // One negotiation round plus execution; false when the loop must end (*reason says why).
  bool RunCycle(Status* reason);
  void WarnAboutStalls();
  void Execute(const Response& response);
  // Runs a process-set change through negotiation and waits for it.
  Status ChangeProcessSets(Collective collective, std::vector<int64_t> argument, int32_t* id);

  const Config config_;
  std::unique_ptr<Controller> controller_;
  const Topology topology_;
  const char* const controller_name_;  // a string literal
  RequestQueue queue_;
  ProcessSetRegistry process_sets_;
  Coordinator coordinator_;  // used on rank 0 only
  CollectiveExecutor executor_;
  std::mutex process_set_calls_mutex_;
  int64_t process_set_calls_ = 0;  // names each add/remove call; guarded by the mutex

  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool has_new_requests_ = false;  // guarded by wake_mutex_
  bool stop_requested_ = false;    // guarded by wake_mutex_

  std::mutex shutdown_mutex_;
  bool shut_down_ = false;  // guarded by shutdown_mutex_
  std::thread thread_;
  std::atomic<int64_t> thread_id_{0};
  std::chrono::steady_clock::time_point last_stall_check_;
};

}  // namespace tutti

#endif  // TUTTI_SRC_CONTEXT_H_
