// The core's state between init and shutdown: the transport, the request queue and the
// background thread that negotiates and executes requests.
//
// Each cycle opens with one bitwise AND across ranks (cycle_flags.h): it says which response
// cache entries every rank has ready (those run without the coordinator) and whether anyone
// needs a full negotiation (new or changed requests, shutdown, a join, announcements from the
// coordinator). Ready requests are then executed in one agreed order, allreduces fused.
#ifndef TUTTI_SRC_CONTEXT_H_
#define TUTTI_SRC_CONTEXT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tuning/autotune.h"
#include "execution/collective_execution.h"
#include "base/config.h"
#include "transport/transport.h"
#include "base/counters.h"
#include "negotiation/cycle_flags.h"
#include "negotiation/negotiation.h"
#include "requests/process_sets.h"
#include "requests/request_queue.h"
#include "negotiation/response_cache.h"
#include "base/status.h"
#include "base/timeline.h"

namespace tutti {

class Context {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects the configured transport (blocking until all ranks joined) and starts the
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

  // Timeline control from any thread; only rank 0 writes a trace.
  Status StartTimeline(const std::string& path);
  void StopTimeline();

  const ProcessSetRegistry& process_sets() const { return process_sets_; }
  const Counters& counters() const { return counters_; }

  // Copies taken at creation: valid from any thread, even while Shutdown() releases the
  // transport.
  const Topology& topology() const { return topology_; }
  const char* transport_name() const { return transport_name_; }
  int64_t background_thread_id() const { return thread_id_.load(); }

 private:
  // A request that hit the response cache and waits for the other ranks' bits.
  struct CachedWait {
    RequestMeta meta;
    Clock::time_point since;
  };
  // One response to execute this cycle, with this rank's request for it (if any).
  struct Work {
    const Response* response = nullptr;
    std::string name;
    PendingOp op;
    bool have_op = false;
    int cache_slot = -1;  // >= 0: it ran from the cache
  };

  Context(const Config& config, std::unique_ptr<Transport> transport);

  void Loop();
  // Waits until the next cycle should start.
  void WaitForCycle(Clock::time_point last_start);
  // One cycle: flags, negotiation when needed, execution; false when the loop must end
  // (*reason says why).
  bool RunCycle(Status* reason);
  // Sorts new requests into cache hits and requests for the coordinator.
  void ClassifyNew(SlotBits* invalidate);
  CycleFlags MyFlags(SlotBits invalidate);
  // Applies the agreed flags: drops invalidated entries, collects the cached responses that
  // every rank has ready, and sends waiting hits to the coordinator when the cache is off.
  void ApplyAgreedFlags(const CycleFlags& agreed, std::vector<Response>* cached,
                        std::vector<int>* cached_slots);
  // Sends this rank's requests to the coordinator and receives the agreed responses.
  Status Negotiate(ResponseList* responses);
  // What rank 0 adds to a negotiation: stall reports and failures, autotune settings.
  void Announce(ResponseList* responses);
  bool WantsToAnnounce();
  void ExecuteAll(const std::vector<Work*>& work, Clock::time_point negotiated);
  void ExecuteOne(Work* work);
  void Complete(const PendingOp& op, const Status& status);
  void UpdateCache(const std::vector<Work*>& work);
  void DemoteCached(int slot);
  void ApplyTuning(const std::vector<double>& tuning);
  void SampleAutotune(const std::vector<Work*>& work);
  // Runs a process-set change through negotiation and waits for it.
  Status ChangeProcessSets(Collective collective, std::vector<int64_t> argument, int32_t* id);

  const Config config_;
  std::unique_ptr<Transport> transport_;
  const Topology topology_;
  const char* const transport_name_;  // a string literal
  Counters counters_;
  Timeline timeline_;
  RequestQueue queue_;
  ProcessSetRegistry process_sets_;
  Coordinator coordinator_;  // used on rank 0 only
  CollectiveExecutor executor_;
  std::mutex process_set_calls_mutex_;
  int64_t process_set_calls_ = 0;  // names each add/remove call; guarded by the mutex

  // Background thread only.
  ResponseCache cache_;
  std::map<int, CachedWait> cached_waits_;  // by cache slot
  std::vector<RequestMeta> unsent_;         // for the coordinator's next negotiation
  bool cache_enabled_;
  double cycle_time_ms_;
  int64_t fusion_threshold_;
  bool joined_here_ = false;
  bool busy_anywhere_ = false;
  Clock::time_point last_stall_report_;
  std::unique_ptr<AutotuneSession> autotune_;  // rank 0 with TUTTI_AUTOTUNE=1
  std::vector<double> tuning_to_announce_;

  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool has_new_requests_ = false;  // guarded by wake_mutex_
  // Mirrors has_new_requests_ for the lock-free look before sleeping; and whether the
  // background thread sleeps (only then does Enqueue pay for a notify).
  std::atomic<bool> new_requests_hint_{false};
  std::atomic<bool> sleeping_{false};
  bool spin_before_sleep_ = false;  // ranks fit the CPUs: polling briefly is cheap
  bool last_cycle_worked_ = false;
  bool stop_requested_ = false;    // guarded by wake_mutex_
  // A collective failed in the transport (a peer died or stopped answering): this generation
  // of the job is over; the loop ends after the cycle and aborts the transport.
  Status transport_failure_;

  std::mutex shutdown_mutex_;
  bool shut_down_ = false;  // guarded by shutdown_mutex_
  std::thread thread_;
  std::atomic<int64_t> thread_id_{0};
};

}  // namespace tutti

#endif  // TUTTI_SRC_CONTEXT_H_
