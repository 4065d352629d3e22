#include "cycle/context.h"

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <future>

#include "base/collective_plan.h"
#include "base/dtype.h"
#include "execution/fusion_plan.h"
#include "base/log.h"
#include "base/thread_affinity.h"
#include "negotiation/wire_format.h"

namespace tutti {
namespace {

const char* const kShutDownMessage = "tutti was shut down before the request ran";

// How long an idle job (nothing in flight anywhere) waits between cycles. New requests wake
// the loop at once; the tick only serves ranks with nothing of their own to submit (members
// of other process sets' collectives) and the shutdown handshake.
const auto kIdleTick = std::chrono::milliseconds(5);

// How long the background thread polls for a next request after a cycle that did work.
const auto kPollAfterWork = std::chrono::microseconds(100);

// Why requests still pending on `my_rank` were failed when `ranks` asked to stop.
std::string ShutdownMessage(const std::vector<int32_t>& ranks, int my_rank) {
  for (int32_t r : ranks) {
    if (r == my_rank) return kShutDownMessage;
  }
  std::string list;
  for (int32_t r : ranks) list += (list.empty() ? "" : ", ") + std::to_string(r);
  return std::string("tutti was shut down by rank") + (ranks.size() > 1 ? "s " : " ") + list +
         " (it called shutdown() or exited) before the request ran";
}

int64_t TensorBytes(const PendingOp& op) {
  int64_t bytes = 0;
  for (const TensorView& t : op.tensors) bytes += ElementCount(t.shape);
  return bytes * static_cast<int64_t>(DtypeSize(op.meta.dtype));
}

}  // namespace

Status Context::Create(const Config& config, std::unique_ptr<Context>* context) {
  std::unique_ptr<Transport> transport;
  Status s = CreateTransport(config, &transport);
  if (!s.ok()) return s;
  std::unique_ptr<Context> created(new Context(config, std::move(transport)));
  if (!config.timeline_path.empty()) {
    s = created->StartTimeline(config.timeline_path);
    if (!s.ok()) return s;
  }
  int cpu = -1;
  s = ThreadAffinityCpu(created->topology_.local_rank, created->topology_.local_size, &cpu);
  if (!s.ok()) return s;
  std::promise<Status> started;
  std::future<Status> started_future = started.get_future();
  Context* self = created.get();
  created->thread_ = std::thread([self, cpu, &started] {
    pthread_setname_np(pthread_self(), "tutti-core");
    self->thread_id_.store(static_cast<int64_t>(syscall(SYS_gettid)));
    Status pinned = PinCurrentThread(cpu);
    started.set_value(pinned);
    if (pinned.ok()) self->Loop();
  });
  s = started_future.get();
  if (!s.ok()) {
    created->thread_.join();
    return s;
  }
  *context = std::move(created);
  return Status::OK();
}

Context::Context(const Config& config, std::unique_ptr<Transport> transport)
    : config_(config),
      transport_(std::move(transport)),
      topology_(transport_->topology()),
      transport_name_(transport_->name()),
      timeline_(topology_.rank),
      process_sets_(topology_.size),
      coordinator_(topology_.size, &process_sets_),
      executor_(transport_.get(), &process_sets_, topology_.rank, &counters_, &timeline_),
      cache_(config.cache_capacity, &counters_),
      stall_inspector_(config, Clock::now()),
      cycle_time_ms_(config.cycle_time_ms),
      fusion_threshold_(config.fusion_threshold_bytes) {
  // Polling for the next request only pays when this host's ranks do not outnumber its CPUs.
  spin_before_sleep_ = topology_.local_size <= sysconf(_SC_NPROCESSORS_ONLN);
  follow_up_cycles_ = transport_->WaitsCheaplyForFlags();
  if (config.autotune && topology_.rank == 0) {
    autotune_.reset(new AutotuneSession(config));
  }
  counters_.Set(kCycleTimeMicros, static_cast<int64_t>(cycle_time_ms_ * 1000));
  counters_.Set(kFusionThresholdBytes, fusion_threshold_);
  counters_.Set(kCacheEnabled, cache_.enabled() ? 1 : 0);
  // The first cycle waits one period, like every later one, unless requests come first.
  last_cycle_start_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
}

Context::~Context() { Shutdown(); }

void Context::Shutdown() {
  std::lock_guard<std::mutex> lock(shutdown_mutex_);
  if (shut_down_) return;
  shut_down_ = true;
  {
    std::lock_guard<std::mutex> wake_lock(wake_mutex_);
    stop_requested_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // The loop already failed what was pending; this catches nothing new but keeps the
  // guarantee independent of how the loop ended.
  for (const PendingOp& op : queue_.Close(Status::Aborted(kShutDownMessage))) {
    op.Complete(Status::Aborted(kShutDownMessage));
  }
  timeline_.Stop();
  transport_.reset();
}

Status Context::Enqueue(PendingOp op) {
  op.enqueued = Clock::now();
  const bool on_device = op.device.on_device();
  Status s = queue_.Enqueue(std::move(op));
  if (!s.ok()) return s;
  if (on_device) device_requests_seen_.store(true, std::memory_order_relaxed);
  Wake();
  return Status::OK();
}

void Context::Wake() {
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    has_new_requests_ = true;
  }
  new_requests_hint_.store(true, std::memory_order_release);
  if (sleeping_.load(std::memory_order_acquire)) wake_.notify_one();
}

Status Context::Run(PendingOp op, double timeout_seconds, bool* finished) {
  *finished = false;
  auto done = std::make_shared<std::atomic<bool>>(false);
  op.finished = done;
  op.enqueued = Clock::now();
  if (op.device.on_device()) device_requests_seen_.store(true, std::memory_order_relaxed);
  Status s = queue_.Enqueue(std::move(op));
  if (!s.ok()) return s;
  {
    // Device requests may need the core's thread (its CUDA context); a busy background thread
    // already runs cycles, and waiting for it to finish one gains nothing: hand over.
    std::unique_lock<std::mutex> cycle(cycle_mutex_, std::try_to_lock);
    if (cycle.owns_lock() && !loop_over_ &&
        !device_requests_seen_.load(std::memory_order_relaxed)) {
      const auto start = Clock::now();
      const auto limit = std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(timeout_seconds < 0 ? 0 : timeout_seconds));
      while (!done->load(std::memory_order_acquire)) {
        counters_.Add(kCallerCycles);
        if (!RunCycle()) break;  // the background thread tears down (woken below)
        if (timeout_seconds >= 0 && Clock::now() - start >= limit) break;
      }
    }
  }
  *finished = done->load(std::memory_order_acquire);
  if (!*finished) Wake();
  return Status::OK();
}

Status Context::StartTimeline(const std::string& path) {
  if (topology_.rank != 0) return Status::OK();
  return timeline_.Start(path);
}

void Context::StopTimeline() { timeline_.Stop(); }

Context::Clock::duration Context::Period() {
  // Alone, nobody waits for us: the period only bounds how long a missed wake-up could delay
  // a request. New requests start a cycle at once, so an isolated request never waits for a
  // tick; requests already in flight wait for the other ranks: look again after the cycle
  // time. An idle job's tick only serves ranks with nothing of their own to submit (members
  // of other process sets' collectives) and the shutdown handshake.
  if (topology_.size == 1) return std::chrono::milliseconds(100);
  if (busy_anywhere_.load(std::memory_order_relaxed) || !queue_.Empty()) {
    return std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double, std::milli>(cycle_time_ms_.load()));
  }
  return kIdleTick;
}

bool Context::FollowUpDue() {
  // Requests that a cycle already saw still wait for other ranks here, and either the last
  // cycle did work (the other ranks are most likely still submitting the same step: the
  // rest follows within microseconds) or some rank had nothing in flight (it has not
  // started the step yet). Open the next cycle at once and let the flag exchange wait for
  // the others (cheaply, or this is off): a late rank then finds everyone waiting, instead
  // of waiting out their cycle time. When every rank had requests in flight and none
  // matched, the cycle time applies, so requests that never match cannot spin the loop;
  // nor can a rank with nothing in flight, which sleeps. New requests alone do not count:
  // they start a cycle anyway, and a blocking caller (Run) runs that cycle itself unless
  // this thread holds the cycle.
  if (!follow_up_cycles_ || !queue_.HasWaiting()) return false;
  return last_cycle_worked_.load(std::memory_order_relaxed) ||
         !busy_everywhere_.load(std::memory_order_relaxed);
}

void Context::WaitForCycle() {
  if (FollowUpDue()) return;
  // Right after a cycle that did work, the next request usually follows within
  // microseconds (the caller waited for this one): look for it for a short while, yielding
  // the CPU, before paying for a sleep and a wake-up (~40 us each way on small VMs).
  if (spin_before_sleep_ && last_cycle_worked_.load(std::memory_order_relaxed)) {
    const auto until = Clock::now() + kPollAfterWork;
    while (!new_requests_hint_.load(std::memory_order_acquire) && Clock::now() < until) {
      sched_yield();
    }
  }
  std::unique_lock<std::mutex> lock(wake_mutex_);
  auto wake_now = [this] { return has_new_requests_ || stop_requested_; };
  sleeping_.store(true, std::memory_order_seq_cst);
  const Clock::time_point last_start(
      Clock::duration(last_cycle_start_.load(std::memory_order_relaxed)));
  wake_.wait_until(lock, last_start + Period(), wake_now);
  sleeping_.store(false, std::memory_order_relaxed);
  has_new_requests_ = false;
  new_requests_hint_.store(false, std::memory_order_relaxed);
}

bool Context::CycleDue() {
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    if (stop_requested_) return true;
  }
  if (queue_.HasNew()) return true;
  const Clock::time_point last_start(
      Clock::duration(last_cycle_start_.load(std::memory_order_relaxed)));
  return Clock::now() >= last_start + Period();
}

void Context::Loop() {
  std::unique_lock<std::mutex> cycle(cycle_mutex_, std::defer_lock);
  end_reason_ = Status::Aborted(kShutDownMessage);
  while (true) {
    WaitForCycle();
    cycle.lock();
    if (loop_over_) break;
    const bool follow_up = FollowUpDue();
    if (follow_up) counters_.Add(kFollowUpCycles);
    if ((follow_up || CycleDue()) && !RunCycle(follow_up)) break;
    cycle.unlock();
  }
  // Still holding the cycle mutex: callers see loop_over_ and run no more cycles.
  // After a transport failure, tell every peer now (closed connections, shared abort word):
  // a survivor must get an error promptly, not wait out its timeout.
  if (!transport_failure_.ok()) transport_->Abort();
  for (const PendingOp& op : queue_.Close(end_reason_)) Complete(op, end_reason_);
  timeline_.Flush(true);
}

bool Context::WantsToAnnounce() {
  if (topology_.rank != 0) return false;
  if (!tuning_to_announce_.empty()) return true;
  return stall_inspector_.Due(coordinator_, Clock::now());
}

CycleFlags Context::MyFlags(SlotBits invalidate) {
  CycleFlags mine;
  cache_.Contribute(Clock::now(), std::move(invalidate), &mine);
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    mine.shutdown = stop_requested_;
  }
  mine.negotiate = cache_.has_unsent() || WantsToAnnounce();
  mine.joined = joined_here_;
  mine.busy = !queue_.Empty() || (topology_.rank == 0 && coordinator_.pending() > 0);
  return mine;
}

Status Context::AgreeFlags(CycleFlags* agreed, bool follow_up) {
  SlotBits invalidate(cache_.capacity());
  for (RequestMeta& meta : queue_.TakeNew()) {
    if (meta.collective == Collective::kJoin) joined_here_ = true;
    cache_.Sort(std::move(meta), Clock::now(), &invalidate);
  }
  // Bits exist only for occupied slots, and every rank's cache holds the same slots: the
  // exchange stops at the last word with one (a few bytes for a small model, not the
  // whole capacity).
  const int slots = cache_.used_slots();
  std::vector<uint64_t> words = EncodeFlags(MyFlags(std::move(invalidate)), slots);
  // A follow-up cycle opens before the others are known to come: its wait sleeps.
  Status s = follow_up ? transport_->AgreeFlagsPatiently(&words) : transport_->AgreeFlags(&words);
  if (!s.ok()) return s;
  *agreed = DecodeAgreedFlags(words, slots);
  busy_anywhere_.store(agreed->busy, std::memory_order_relaxed);
  busy_everywhere_.store(agreed->busy_everywhere, std::memory_order_relaxed);
  return Status::OK();
}

Status Context::Negotiate(const CycleFlags& agreed, Agreement* agreement) {
  cache_.ApplyAgreed(agreed, &agreement->cached_slots);
  const bool full =
      agreed.negotiate || agreed.shutdown || agreed.joined || agreed.invalidate.Any();
  if (!full) return Status::OK();
  counters_.Add(kNegotiations);
  return AskCoordinator(&agreement->negotiated);
}

Status Context::AskCoordinator(ResponseList* responses) {
  RequestList mine;
  mine.requests = cache_.TakeUnsent();
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    mine.shutdown = stop_requested_;
  }
  std::vector<std::string> gathered;
  Status s = transport_->GatherToRoot(SerializeRequestList(mine), &gathered);
  std::string response_bytes;
  if (s.ok() && topology_.rank == 0) {
    ResponseList answer;
    for (size_t rank = 0; rank < gathered.size() && s.ok(); ++rank) {
      RequestList list;
      s = ParseRequestList(gathered[rank], &list);
      for (const RequestMeta& request : list.requests) {
        coordinator_.Submit(static_cast<int>(rank), request);
      }
      if (list.shutdown) answer.shutdown_ranks.push_back(static_cast<int32_t>(rank));
    }
    answer.responses = coordinator_.TakeReady();
    Announce(&answer);
    response_bytes = SerializeResponseList(answer);
  }
  if (s.ok()) s = transport_->BroadcastFromRoot(&response_bytes);
  if (s.ok()) s = ParseResponseList(response_bytes, responses);
  return s;
}

void Context::Announce(ResponseList* responses) {
  stall_inspector_.Inspect(&coordinator_, Clock::now(), responses);
  responses->tuning = std::move(tuning_to_announce_);
  tuning_to_announce_.clear();
}

bool Context::RunCycle(bool follow_up) {
  counters_.Add(kCycles);
  const auto cycle_start = Clock::now();
  last_cycle_start_.store(cycle_start.time_since_epoch().count(), std::memory_order_relaxed);
  CycleFlags agreed;
  Agreement agreement;
  Status s = AgreeFlags(&agreed, follow_up);
  if (s.ok()) s = Negotiate(agreed, &agreement);
  if (!s.ok()) {
    end_reason_ = Status::Aborted("tutti's " + std::string(transport_name_) +
                                  " transport failed during negotiation: " + s.message());
    transport_failure_ = end_reason_;
    loop_over_ = true;
    return false;
  }
  Execute(agreement, cycle_start, Clock::now());
  if (Continues(agreement.negotiated, &end_reason_)) return true;
  loop_over_ = true;
  return false;
}

void Context::Execute(const Agreement& agreement, Clock::time_point cycle_start,
                      Clock::time_point negotiated_at) {
  const ResponseList& negotiated = agreement.negotiated;
  for (const std::string& warning : negotiated.warnings) {
    counters_.Add(kStallWarnings);
    LogWarning("rank " + std::to_string(topology_.rank) + ": " + warning);
  }

  // Everything agreed this cycle, cached first, in the same order on every rank.
  // Cached responses are read in place, not copied (each copy costs a few allocations
  // per request): the cache changes only in UpdateCache, after everything else has run.
  size_t count = agreement.cached_slots.size();
  for (const Response& response : negotiated.responses) count += response.names.size();
  std::vector<Work> work(count);
  size_t next = 0;
  for (int slot : agreement.cached_slots) {
    Work& w = work[next++];
    w.response = &cache_.response(slot);
    w.name = &w.response->names[0];
    w.cache_slot = slot;
  }
  for (const Response& response : negotiated.responses) {
    for (const std::string& name : response.names) {
      Work& w = work[next++];
      w.response = &response;
      w.name = &name;
    }
  }
  std::vector<Work*> order(count);
  std::vector<const std::string*> names(count);
  std::vector<PendingOp*> ops(count);
  for (size_t i = 0; i < count; ++i) {
    order[i] = &work[i];
    names[i] = work[i].name;
    ops[i] = &work[i].op;
  }
  std::vector<bool> found;
  queue_.TakeAll(names, ops, &found);
  for (size_t i = 0; i < count; ++i) work[i].have_op = found[i];
  last_cycle_worked_.store(!order.empty(), std::memory_order_relaxed);
  ExecuteAll(order, negotiated_at);
  if (autotune_) SampleAutotune(order);
  UpdateCache(order);
  // Back to the queue, which frees each on a submitting thread (request_queue.h says why).
  for (Work& w : work) {
    if (w.have_op) executed_.push_back(std::move(w.op));
  }
  queue_.Recycle(&executed_);
  if (!negotiated.tuning.empty()) ApplyTuning(negotiated.tuning);
  if (config_.timeline_mark_cycles && timeline_.active() && !work.empty()) {
    timeline_.Span("negotiation cycles", "cycle", cycle_start, Clock::now(),
                   "\"responses\": " + std::to_string(work.size()));
  }
  timeline_.Flush();
}

bool Context::Continues(const ResponseList& negotiated, Status* reason) {
  if (!transport_failure_.ok()) {
    *reason = Status::Aborted("tutti's " + std::string(transport_name_) +
                              " transport failed: " + transport_failure_.message());
    return false;
  }
  if (negotiated.shutdown_ranks.empty()) return true;
  *reason = Status::Aborted(ShutdownMessage(negotiated.shutdown_ranks, topology_.rank));
  return false;
}

void Context::ExecuteAll(const std::vector<Work*>& work, Clock::time_point negotiated) {
  std::vector<FusionItem> items(work.size());
  for (size_t i = 0; i < work.size(); ++i) {
    const Work& w = *work[i];
    FusionItem& item = items[i];
    item.fusible = w.have_op && w.response->kind == Response::Kind::kExecute &&
                   w.response->collective == Collective::kAllreduce &&
                   w.response->joined_ranks.empty();
    if (!item.fusible) continue;
    item.process_set = w.response->process_set;
    item.dtype = w.op.meta.dtype;
    item.reduce_op = w.op.meta.reduce_op;
    item.prescale = w.op.meta.prescale;
    item.postscale = w.op.meta.postscale;
    item.bytes = TensorBytes(w.op);
    item.device = w.op.device.on_device() ? w.op.device.index : -1;
  }
  if (timeline_.active()) {
    for (const Work* w : work) {
      if (w->have_op) timeline_.Span(*w->name, "negotiate", w->op.enqueued, negotiated);
    }
  }
  for (const std::vector<size_t>& group : PlanFusion(items, fusion_threshold_)) {
    if (!items[group[0]].fusible) {
      ExecuteOne(work[group[0]]);
      continue;
    }
    std::vector<const PendingOp*> ops;
    for (size_t i : group) ops.push_back(&work[i]->op);
    if (timeline_.active()) {
      const auto now = Clock::now();
      for (const PendingOp* op : ops) timeline_.Span(op->meta.name, "queued", negotiated, now);
    }
    Status s = executor_.ExecuteFusedAllreduce(items[group[0]].process_set, ops);
    NoteTransportCounters();
    // Last submitted first: a caller synchronizes its requests in the order it made them,
    // so it sleeps on the first until the whole group is done and wakes once. In order,
    // each completion woke it to find the next one not yet done (two context switches per
    // request when the ranks' threads outnumber the CPUs).
    for (auto op = ops.rbegin(); op != ops.rend(); ++op) {
      Complete(**op, s.ok() ? s
                            : Status(s.code(), "allreduce of tensor '" + (*op)->meta.name +
                                                   "' failed: " + s.message()));
    }
  }
}

void Context::ExecuteOne(Work* work) {
  const Response& response = *work->response;
  if (response.collective == Collective::kJoin && response.kind == Response::Kind::kExecute) {
    joined_here_ = false;  // every rank has joined: the join is over everywhere
  }
  if (!work->have_op) {
    bool joined = false;
    for (int32_t r : response.joined_ranks) joined = joined || r == topology_.rank;
    if (joined && response.kind == Response::Kind::kExecute) {
      Status s = executor_.ExecuteJoined(response);
      if (!s.ok()) {
        LogWarning("allreduce of '" + *work->name + "' as a joined rank: " + s.message());
      }
      return;
    }
    // Responses for sets without this rank, and errors about requests it never made, are
    // not its business; anything else means a broken rank.
    const bool member = process_sets_.RankIn(response.process_set, topology_.rank) >= 0;
    if (member && response.kind == Response::Kind::kExecute &&
        response.collective != Collective::kJoin) {
      LogWarning("negotiation answered request '" + *work->name +
                 "', which this rank does not have");
    }
    return;
  }
  if (response.kind == Response::Kind::kError) {
    Complete(work->op, Status::Precondition(response.error));
    return;
  }
  const Status s = executor_.Execute(response, work->op);
  NoteTransportCounters();
  Complete(work->op, s);
}

void Context::NoteTransportCounters() {
  // Once per collective, before its completions wake a caller who may read the counters.
  counters_.Set(kShmSingleCopyCalls, transport_->SingleCopyCalls());
  counters_.Set(kShmStreamingCalls, transport_->StreamingCalls());
  counters_.Set(kShmCpuMoves, transport_->CpuMoves());
}

void Context::Complete(const PendingOp& op, const Status& status) {
  // The controllers report a failed transport (peer gone, timeout) as ABORTED; other
  // failures (bad arguments, mismatches) leave the job usable.
  if (status.code() == TUTTI_ERR_ABORTED && transport_failure_.ok()) transport_failure_ = status;
  counters_.Add(kRequestsDone);
  op.Complete(status);
}

void Context::UpdateCache(const std::vector<Work*>& work) {
  for (const Work* w : work) {
    if (w->cache_slot >= 0) {
      cache_.Ran(w->cache_slot);
    } else {
      cache_.Remember(*w->response, w->have_op ? &w->op.meta : nullptr);
    }
  }
  // Entries of removed process sets go (the same on every rank).
  cache_.ForgetRemovedSets(process_sets_);
}

void Context::ApplyTuning(const std::vector<double>& tuning) {
  if (tuning.size() < 3) return;
  cycle_time_ms_ = tuning[0];
  fusion_threshold_ = static_cast<int64_t>(tuning[1]);
  cache_.SetEnabled(tuning[2] > 0.5 && config_.cache_capacity > 0);
  counters_.Set(kCycleTimeMicros, static_cast<int64_t>(cycle_time_ms_ * 1000));
  counters_.Set(kFusionThresholdBytes, fusion_threshold_);
  counters_.Set(kCacheEnabled, cache_.enabled() ? 1 : 0);
}

void Context::SampleAutotune(const std::vector<Work*>& work) {
  int64_t bytes = 0;
  for (const Work* w : work) {
    if (w->have_op && w->response->collective == Collective::kAllreduce &&
        w->response->kind == Response::Kind::kExecute) {
      bytes += TensorBytes(w->op);
    }
  }
  std::vector<double> next;
  if (autotune_->Observe(bytes, Clock::now(), &next)) tuning_to_announce_ = next;
  counters_.Set(kAutotuneSamples, autotune_->samples());
  counters_.Set(kAutotuneConverged, autotune_->converged() ? 1 : 0);
}

namespace {

// Completion of a blocking process-set call; shared with the callback, which may run after a
// timed-out caller has left.
struct BlockingCall {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  Status status;
  int32_t id = -1;
};

void OnBlockingCallDone(void* user_data, tutti_status code, const char* message) {
  auto* holder = static_cast<std::shared_ptr<BlockingCall>*>(user_data);
  std::shared_ptr<BlockingCall> call = *holder;
  delete holder;
  std::lock_guard<std::mutex> lock(call->mutex);
  call->done = true;
  call->status = Status(code, message ? message : "");
  call->cv.notify_all();
}

}  // namespace

Status Context::AddProcessSet(const std::vector<int32_t>& ranks, int32_t* id) {
  Status s = ProcessSetRegistry::Validate(ranks, topology_.size);
  if (!s.ok()) return Status(s.code(), "add_process_set: " + s.message());
  return ChangeProcessSets(Collective::kAddProcessSet,
                           std::vector<int64_t>(ranks.begin(), ranks.end()), id);
}

Status Context::RemoveProcessSet(int32_t id) {
  if (id == TUTTI_GLOBAL_PROCESS_SET) {
    return Status::InvalidArgument("remove_process_set: the global process set cannot be removed");
  }
  if (process_sets_.Size(id) < 0) {
    return Status::InvalidArgument("remove_process_set: process set " + std::to_string(id) +
                                   " is unknown");
  }
  return ChangeProcessSets(Collective::kRemoveProcessSet, {id}, nullptr);
}

Status Context::ChangeProcessSets(Collective collective, std::vector<int64_t> argument,
                                  int32_t* id) {
  auto call = std::make_shared<BlockingCall>();
  PendingOp op;
  {
    // Every rank makes these calls in the same order, so the n-th call has the same name
    // everywhere.
    std::lock_guard<std::mutex> lock(process_set_calls_mutex_);
    op.meta.name = "tutti.process_set_change." + std::to_string(process_set_calls_++);
  }
  op.meta.collective = collective;
  op.meta.shapes = {std::move(argument)};
  op.result = &call->id;
  op.done = OnBlockingCallDone;
  auto* holder = new std::shared_ptr<BlockingCall>(call);
  op.user_data = holder;
  Status s = Enqueue(std::move(op));
  if (!s.ok()) {
    delete holder;  // done is never called for a refused request
    return s;
  }
  std::unique_lock<std::mutex> lock(call->mutex);
  const auto timeout = std::chrono::duration<double>(config_.timeout_seconds);
  if (!call->cv.wait_for(lock, timeout, [&] { return call->done; })) {
    return Status::Aborted(std::string(CollectiveName(collective)) +
                           ": not every rank made this call within " +
                           std::to_string(static_cast<int>(config_.timeout_seconds)) +
                           " s (TUTTI_GLOO_TIMEOUT_SECONDS); every rank must add and remove "
                           "process sets in the same order");
  }
  if (!call->status.ok()) return call->status;
  if (id != nullptr) *id = call->id;
  return Status::OK();
}

}  // namespace tutti
