#include "context.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <future>

#include "dtype.h"
#include "log.h"
#include "wire_format.h"

namespace tutti {
namespace {

const char* const kShutDownMessage = "tutti was shut down before the request ran";

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

// How long a request may wait for other ranks before rank 0 warns about it.
const std::chrono::seconds kStallWarningAge(60);

}  // namespace

Status Context::Create(const Config& config, std::unique_ptr<Context>* context) {
  std::unique_ptr<Controller> controller;
  Status s = CreateController(config, &controller);
  if (!s.ok()) return s;
  std::unique_ptr<Context> created(new Context(config, std::move(controller)));
  std::promise<void> started;
  std::future<void> started_future = started.get_future();
  Context* self = created.get();
  created->thread_ = std::thread([self, &started] {
    pthread_setname_np(pthread_self(), "tutti-core");
    self->thread_id_.store(static_cast<int64_t>(syscall(SYS_gettid)));
    started.set_value();
    self->Loop();
  });
  started_future.wait();
  *context = std::move(created);
  return Status::OK();
}

Context::Context(const Config& config, std::unique_ptr<Controller> controller)
    : config_(config),
      controller_(std::move(controller)),
      topology_(controller_->topology()),
      controller_name_(controller_->name()),
      process_sets_(topology_.size),
      coordinator_(topology_.size, &process_sets_),
      executor_(controller_.get(), &process_sets_, topology_.rank),
      last_stall_check_(std::chrono::steady_clock::now()) {}

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
  controller_.reset();
}

Status Context::Enqueue(PendingOp op) {
  Status s = queue_.Enqueue(std::move(op));
  if (!s.ok()) return s;
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    has_new_requests_ = true;
  }
  wake_.notify_one();
  return Status::OK();
}

void Context::WaitForCycle(std::chrono::steady_clock::time_point cycle_start) {
  std::unique_lock<std::mutex> lock(wake_mutex_);
  if (topology_.size == 1) {
    // Nobody to batch with: run as soon as there is work (or a stop request). The timeout
    // only bounds how long a missed wake-up could delay us.
    wake_.wait_for(lock, std::chrono::milliseconds(100),
                   [this] { return has_new_requests_ || stop_requested_; });
  } else {
    // All ranks tick at the cycle period; every request that arrived during a tick is
    // negotiated together at the next one.
    auto next = cycle_start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double, std::milli>(config_.cycle_time_ms));
    wake_.wait_until(lock, next, [this] { return stop_requested_; });
  }
  has_new_requests_ = false;
}

void Context::Loop() {
  Status reason = Status::Aborted(kShutDownMessage);
  auto cycle_start = std::chrono::steady_clock::now();
  while (true) {
    WaitForCycle(cycle_start);
    cycle_start = std::chrono::steady_clock::now();
    if (!RunCycle(&reason)) break;
  }
  for (const PendingOp& op : queue_.Close(reason)) op.Complete(reason);
}

bool Context::RunCycle(Status* reason) {
  RequestList mine;
  mine.requests = queue_.TakeNew();
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    mine.shutdown = stop_requested_;
  }
  std::vector<std::string> gathered;
  Status s = controller_->GatherToRoot(SerializeRequestList(mine), &gathered);
  std::string response_bytes;
  if (s.ok() && topology_.rank == 0) {
    ResponseList responses;
    for (size_t rank = 0; rank < gathered.size() && s.ok(); ++rank) {
      RequestList list;
      s = ParseRequestList(gathered[rank], &list);
      for (const RequestMeta& request : list.requests) {
        coordinator_.Submit(static_cast<int>(rank), request);
      }
      if (list.shutdown) responses.shutdown_ranks.push_back(static_cast<int32_t>(rank));
    }
    responses.responses = coordinator_.TakeReady();
    response_bytes = SerializeResponseList(responses);
    WarnAboutStalls();
  }
  if (s.ok()) s = controller_->BroadcastFromRoot(&response_bytes);
  ResponseList responses;
  if (s.ok()) s = ParseResponseList(response_bytes, &responses);
  if (!s.ok()) {
    *reason = Status::Aborted("tutti's " + std::string(controller_name_) +
                              " transport failed during negotiation: " + s.message());
    return false;
  }
  for (const Response& response : responses.responses) Execute(response);
  if (responses.shutdown_ranks.empty()) return true;
  *reason = Status::Aborted(ShutdownMessage(responses.shutdown_ranks, topology_.rank));
  return false;
}

void Context::WarnAboutStalls() {
  auto now = std::chrono::steady_clock::now();
  if (now - last_stall_check_ < kStallWarningAge) return;
  last_stall_check_ = now;
  std::vector<std::string> stalled = coordinator_.Stalled(kStallWarningAge);
  if (stalled.empty()) return;
  std::string list;
  for (const std::string& item : stalled) list += (list.empty() ? "" : ", ") + item;
  LogWarning("requests submitted by some ranks only for more than 60 s (every rank must "
             "submit the same names): " + list);
}

void Context::Execute(const Response& response) {
  for (const std::string& name : response.names) {
    PendingOp op;
    if (!queue_.Take(name, &op)) {
      bool joined = false;
      for (int32_t r : response.joined_ranks) joined = joined || r == topology_.rank;
      if (joined && response.kind == Response::Kind::kExecute) {
        Status s = executor_.ExecuteJoined(response);
        if (!s.ok()) LogWarning("allreduce of '" + name + "' as a joined rank: " + s.message());
        continue;
      }
      // Responses for sets without this rank, and errors about requests it never made, are
      // not its business; anything else means a broken rank.
      const bool member = process_sets_.RankIn(response.process_set, topology_.rank) >= 0;
      if (member && response.kind == Response::Kind::kExecute) {
        LogWarning("negotiation answered request '" + name + "', which this rank does not have");
      }
      continue;
    }
    if (response.kind == Response::Kind::kError) {
      op.Complete(Status::Precondition(response.error));
      continue;
    }
    op.Complete(executor_.Execute(response, op));
  }
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
