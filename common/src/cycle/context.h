// The core's state between init and shutdown: the transport, the request queue and the
// background thread that negotiates and executes requests.
//
// Cycles run one at a time under cycle_mutex_, on the background thread or, through Run(), on
// a thread that submitted a blocking request while the background thread was idle: that
// caller then negotiates and executes its own request (and whatever else the cycle agrees)
// without a hand-off or a wake-up. Every field marked "cycle only" is guarded by the mutex.
//
// Each cycle reads flags -> negotiate -> execute. It opens with one bitwise AND across ranks
// (cycle_flags.h): which response cache entries every rank has ready (those run without the
// coordinator, cache_coordination.h) and whether anyone needs a full negotiation (new or
// changed requests, shutdown, a join, announcements from the coordinator such as the stall
// inspector's). Agreed requests are then executed in one agreed order, allreduces fused.
#ifndef TUTTI_SRC_CONTEXT_H_
#define TUTTI_SRC_CONTEXT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tuning/autotune.h"
#include "execution/collective_execution.h"
#include "base/config.h"
#include "transport/transport.h"
#include "base/counters.h"
#include "negotiation/cache_coordination.h"
#include "negotiation/cycle_flags.h"
#include "negotiation/negotiation.h"
#include "requests/process_sets.h"
#include "requests/request_queue.h"
#include "negotiation/stall_inspector.h"
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

  // Enqueue, then runs cycles on the calling thread until the request is done, when the
  // background thread is idle and no device request was ever queued. *finished: whether done
  // was called before the return; if not, the request was left to the background thread
  // (busy, or not done within timeout_seconds; < 0: no limit).
  Status Run(PendingOp op, double timeout_seconds, bool* finished);

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
  // One response to execute this cycle, with this rank's request for it (if any).
  struct Work {
    // Into the cache or the cycle's negotiated list: valid until the cycle updates the
    // cache (UpdateCache), which comes last.
    const Response* response = nullptr;
    const std::string* name = nullptr;
    PendingOp op;
    bool have_op = false;
    int cache_slot = -1;  // >= 0: it ran from the cache
  };
  // What a cycle agreed to run: the cache slots every rank has ready, then the
  // coordinator's answer when a negotiation ran.
  struct Agreement {
    std::vector<int> cached_slots;
    ResponseList negotiated;
  };

  Context(const Config& config, std::unique_ptr<Transport> transport);

  void Loop();
  // Waits until the next cycle may be due: new requests, a stop, or the period since the
  // last cycle (whoever ran it) has passed.
  void WaitForCycle();
  // Whether the background thread should run a cycle now (cycle mutex held): callers may
  // have run one since it went to sleep.
  bool CycleDue();
  // Whether to open the next cycle at once because the last one did work and requests are
  // still in flight here.
  bool FollowUpDue();
  Clock::duration Period();
  // Tells the background thread about new requests (and wakes it if it sleeps).
  void Wake();
  // One cycle (cycle mutex held): flags, then negotiation (cache and, when needed, the
  // coordinator), then execution; false when the loop must end (end_reason_ says why, and
  // loop_over_ is set). follow_up: opened early (FollowUpDue), so its flag exchange waits
  // for the other ranks asleep.
  bool RunCycle(bool follow_up = false);
  // 1. Flags: sorts new requests and agrees with every rank on the cycle's flags.
  Status AgreeFlags(CycleFlags* agreed, bool follow_up);
  CycleFlags MyFlags(SlotBits invalidate);
  // 2. Negotiation: what the flags let run from the cache, plus a round trip to the
  // coordinator when any rank needs one.
  Status Negotiate(const CycleFlags& agreed, Agreement* agreement);
  // Sends this rank's requests to the coordinator and receives the agreed responses.
  Status AskCoordinator(ResponseList* responses);
  // What rank 0 adds to a negotiation: stall reports and failures, autotune settings.
  void Announce(ResponseList* responses);
  bool WantsToAnnounce();
  // 3. Execution of everything agreed, in the agreed order on every rank.
  void Execute(const Agreement& agreement, Clock::time_point cycle_start,
               Clock::time_point negotiated);
  void ExecuteAll(const std::vector<Work*>& work, Clock::time_point negotiated);
  void ExecuteOne(Work* work);
  void Complete(const PendingOp& op, const Status& status);
  // Copies the transport's own counts (single copies) into the counters.
  void NoteTransportCounters();
  void UpdateCache(const std::vector<Work*>& work);
  void ApplyTuning(const std::vector<double>& tuning);
  void SampleAutotune(const std::vector<Work*>& work);
  // Whether the loop goes on after the cycle: not after a transport failure or a shutdown.
  bool Continues(const ResponseList& negotiated, Status* reason);
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

  // Cycle only (guarded by cycle_mutex_).
  std::mutex cycle_mutex_;
  bool loop_over_ = false;  // a cycle ended the loop; the background thread tears down
  Status end_reason_;       // why, for the requests still pending
  CacheCoordination cache_;
  StallInspector stall_inspector_;  // used on rank 0 only
  std::atomic<double> cycle_time_ms_;  // also read by the background thread's sleep
  int64_t fusion_threshold_;
  bool joined_here_ = false;
  // Written by cycles, read by the background thread while it decides how long to sleep.
  std::atomic<bool> busy_anywhere_{false};
  std::atomic<bool> busy_everywhere_{false};
  std::atomic<bool> last_cycle_worked_{false};
  std::atomic<Clock::rep> last_cycle_start_{0};
  std::atomic<bool> device_requests_seen_{false};  // Run() then leaves requests to the thread
  std::unique_ptr<AutotuneSession> autotune_;  // rank 0 with TUTTI_AUTOTUNE=1
  std::vector<double> tuning_to_announce_;
  std::vector<PendingOp> executed_;  // a cycle's executed requests, on their way back

  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool has_new_requests_ = false;  // guarded by wake_mutex_
  // Mirrors has_new_requests_ for the lock-free look before sleeping; and whether the
  // background thread sleeps (only then does Enqueue pay for a notify).
  std::atomic<bool> new_requests_hint_{false};
  std::atomic<bool> sleeping_{false};
  bool spin_before_sleep_ = false;  // ranks fit the CPUs: polling briefly is cheap
  bool follow_up_cycles_ = false;   // the transport waits for flags cheaply (FollowUpDue)
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
