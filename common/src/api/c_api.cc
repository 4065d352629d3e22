// The C ABI. The only process-wide state of the core lives here: the current context (behind
// a mutex), a count of inits (so each init uses fresh rendezvous keys) and each thread's
// last error message. Everything else belongs to the context.
#include "tutti/c_api.h"

#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "base/at_fork.h"
#include "base/config.h"
#include "cycle/context.h"
#include "base/dtype.h"
#include "gpu/device_executor.h"
#include "gpu/gpu_libraries.h"
#include "transport/mpi_runtime.h"
#include "requests/request_builder.h"
#include "base/status.h"
#include "base/version.h"

namespace {

using tutti::Context;
using tutti::Status;

// Serialises init and shutdown (which can take long: connecting, joining the thread).
std::mutex lifecycle_mutex;
// Guards the pointer only, so requests and getters never wait for init or shutdown.
std::mutex context_mutex;
std::shared_ptr<Context> current_context;
int init_count = 0;          // guarded by lifecycle_mutex
bool was_shut_down = false;  // guarded by context_mutex
bool exit_hook_registered = false;  // guarded by lifecycle_mutex
bool fork_handlers_registered = false;  // guarded by lifecycle_mutex

thread_local std::string last_error;

tutti_status Fail(const Status& status) {
  last_error = status.message();
  return status.code();
}

Status NotInitialized() {
  if (tutti::ForkedFrom() != 0) {
    return Status::NotInitialized(
        "this process is a fork of process " + std::to_string(tutti::ForkedFrom()) +
        ", which initialized tutti; the parent's communication state cannot be used here: "
        "call init() in the child process to use tutti in it");
  }
  return Status::NotInitialized(
      was_shut_down ? "tutti has been shut down: call init() again before using it"
                    : "tutti is not initialized: call init() first");
}

// The current context, or null with the reason in *status.
std::shared_ptr<Context> GetContext(Status* status) {
  std::lock_guard<std::mutex> lock(context_mutex);
  if (!current_context) *status = NotInitialized();
  return current_context;
}

// A process that exits without shutdown() still stops the background thread cleanly (and,
// through negotiation, tells its peers) before MPI is finalized by its own exit hook, which
// was registered earlier and so runs later.
void ShutdownAtExit() { tutti_shutdown(); }

// fork() (at_fork.h). Before it, hold context_mutex so the child's copy is consistent; in
// the child, abandon the parent's context without running a single destructor (leaked on
// purpose: its threads do not exist here and its sockets, epoll sets and segments are the
// parent's), and give the child fresh mutexes (a thread of the parent may have held them).
pid_t pid_before_fork = 0;

void BeforeFork() {
  context_mutex.lock();
  pid_before_fork = current_context ? getpid() : 0;
}

void AfterForkInParent() { context_mutex.unlock(); }

void AfterForkInChild() {
  new (&context_mutex) std::mutex();
  new (&lifecycle_mutex) std::mutex();
  if (current_context) {
    new std::shared_ptr<Context>(std::move(current_context));  // never destroyed
    current_context.reset();
    tutti::SetForkedFrom(static_cast<int>(pid_before_fork));
  }
}

// The current context, and `request` validated for it into `pending`.
tutti_status Prepare(const tutti_request& request, std::shared_ptr<Context>* context,
                     tutti::PendingOp* pending) {
  Status status;
  *context = GetContext(&status);
  if (!*context) return Fail(status);
  status = tutti::BuildRequest(request, (*context)->topology().rank, (*context)->process_sets(),
                               pending);
  if (!status.ok()) return Fail(status);
  return TUTTI_OK;
}

// Validates `request` and queues it on the current context; `device` NULL: host memory.
tutti_status EnqueueRequest(const tutti_request& request, const tutti_device* device = nullptr) {
  std::shared_ptr<Context> context;
  tutti::PendingOp pending;
  tutti_status prepared = Prepare(request, &context, &pending);
  if (prepared != TUTTI_OK) return prepared;
  Status status = tutti::gpu::AttachDevice(device, &pending);
  if (status.ok()) status = context->Enqueue(std::move(pending));
  if (!status.ok()) return Fail(status);
  return TUTTI_OK;
}

// Validates `request` and runs it on the calling thread when the core lets it (Context::Run).
tutti_status RunRequest(const tutti_request& request, double timeout_seconds,
                        int32_t* finished) {
  std::shared_ptr<Context> context;
  tutti::PendingOp pending;
  tutti_status prepared = Prepare(request, &context, &pending);
  if (prepared != TUTTI_OK) return prepared;
  bool done = false;
  Status status = context->Run(std::move(pending), timeout_seconds, &done);
  if (!status.ok()) return Fail(status);
  if (finished != nullptr) *finished = done ? 1 : 0;
  return TUTTI_OK;
}

// Topology getters share this: -1 with the last error set before init.
template <typename Getter>
int TopologyValue(Getter getter) {
  Status status;
  std::shared_ptr<Context> context = GetContext(&status);
  if (!context) {
    Fail(status);
    return -1;
  }
  return getter(context->topology());
}

}  // namespace

extern "C" {

int tutti_c_api_version(void) { return TUTTI_C_API_VERSION; }

const char* tutti_version(void) { return TUTTI_CORE_VERSION; }

int tutti_built(const char* name) {
  if (name == nullptr) return 0;
  const std::string n(name);
  if (n == "cuda") return tutti::gpu::Cuda(nullptr) != nullptr ? 1 : 0;
  if (n == "nccl") return tutti::gpu::Nccl(nullptr) != nullptr ? 1 : 0;
  return (n == "mpi" || n == "gloo") ? 1 : 0;
}

int tutti_c_api_minor_version(void) { return TUTTI_C_API_MINOR_VERSION; }

const char* tutti_gpu_library_error(const char* name) {
  static thread_local std::string reason;
  reason.clear();
  const std::string n(name ? name : "");
  if (n == "cuda") {
    tutti::gpu::Cuda(&reason);
  } else if (n == "nccl") {
    tutti::gpu::Nccl(&reason);
  } else {
    reason = "unknown library '" + n + "' (cuda or nccl)";
  }
  return reason.c_str();
}

tutti_status tutti_init(void) {
  std::lock_guard<std::mutex> lifecycle(lifecycle_mutex);
  {
    std::lock_guard<std::mutex> lock(context_mutex);
    if (current_context) return TUTTI_OK;
  }
  tutti::Config config;
  Status s = tutti::ParseConfig(tutti::ProcessEnv(), &config);
  if (!s.ok()) return Fail(Status(s.code(), "tutti init failed: " + s.message()));
  config.generation = init_count++;
  std::unique_ptr<Context> context;
  s = Context::Create(config, &context);
  if (!s.ok()) return Fail(Status(s.code(), "tutti init failed: " + s.message()));
  {
    std::lock_guard<std::mutex> lock(context_mutex);
    current_context = std::move(context);
  }
  if (!exit_hook_registered) {
    exit_hook_registered = true;
    std::atexit(ShutdownAtExit);
  }
  if (!fork_handlers_registered) {
    fork_handlers_registered = true;
    pthread_atfork(BeforeFork, AfterForkInParent, AfterForkInChild);
  }
  tutti::SetForkedFrom(0);  // initialized in its own right now
  return TUTTI_OK;
}

tutti_status tutti_shutdown(void) {
  std::lock_guard<std::mutex> lifecycle(lifecycle_mutex);
  std::shared_ptr<Context> context;
  {
    std::lock_guard<std::mutex> lock(context_mutex);
    context = std::move(current_context);
    current_context.reset();
    if (context) was_shut_down = true;
  }
  if (context) context->Shutdown();
  return TUTTI_OK;
}

int tutti_is_initialized(void) {
  std::lock_guard<std::mutex> lock(context_mutex);
  return current_context ? 1 : 0;
}

const char* tutti_last_error(void) { return last_error.c_str(); }

int tutti_rank(void) {
  return TopologyValue([](const tutti::Topology& t) { return t.rank; });
}
int tutti_size(void) {
  return TopologyValue([](const tutti::Topology& t) { return t.size; });
}
int tutti_local_rank(void) {
  return TopologyValue([](const tutti::Topology& t) { return t.local_rank; });
}
int tutti_local_size(void) {
  return TopologyValue([](const tutti::Topology& t) { return t.local_size; });
}
int tutti_cross_rank(void) {
  return TopologyValue([](const tutti::Topology& t) { return t.cross_rank; });
}
int tutti_cross_size(void) {
  return TopologyValue([](const tutti::Topology& t) { return t.cross_size; });
}

const char* tutti_controller(void) {
  Status status;
  std::shared_ptr<Context> context = GetContext(&status);
  return context ? context->transport_name() : "";
}

int64_t tutti_background_thread_id(void) {
  Status status;
  std::shared_ptr<Context> context = GetContext(&status);
  return context ? context->background_thread_id() : 0;
}

tutti_status tutti_allreduce_async(const char* name, const tutti_tensor* input,
                                   const tutti_tensor* output, tutti_reduce_op op,
                                   double prescale, double postscale, tutti_done_fn done,
                                   void* user_data) {
  if (input == nullptr || output == nullptr) {
    return Fail(Status::InvalidArgument(std::string("allreduce of '") + (name ? name : "") +
                                        "': " + (input ? "output" : "input") +
                                        " tensor is NULL"));
  }
  tutti_request request = {};
  request.name = name;
  request.collective = TUTTI_OP_ALLREDUCE;
  request.process_set = TUTTI_GLOBAL_PROCESS_SET;
  request.num_tensors = 1;
  request.inputs = input;
  request.outputs = output;
  request.reduce_op = op;
  request.prescale = prescale;
  request.postscale = postscale;
  request.done = done;
  request.user_data = user_data;
  return EnqueueRequest(request);
}

tutti_status tutti_enqueue(const tutti_request* request) {
  if (request == nullptr) return Fail(Status::InvalidArgument("tutti_enqueue: request is NULL"));
  return EnqueueRequest(*request);
}

tutti_status tutti_run(const tutti_request* request, double timeout_seconds,
                       int32_t* finished) {
  if (request == nullptr) return Fail(Status::InvalidArgument("tutti_run: request is NULL"));
  return RunRequest(*request, timeout_seconds, finished);
}

tutti_status tutti_enqueue_on_device(const tutti_request* request, const tutti_device* device) {
  if (request == nullptr) {
    return Fail(Status::InvalidArgument("tutti_enqueue_on_device: request is NULL"));
  }
  return EnqueueRequest(*request, device);
}

tutti_status tutti_add_process_set(const int32_t* ranks, int32_t num_ranks, int32_t* id_out) {
  Status status;
  std::shared_ptr<Context> context = GetContext(&status);
  if (!context) return Fail(status);
  if (id_out == nullptr || (ranks == nullptr && num_ranks > 0) || num_ranks < 0) {
    return Fail(Status::InvalidArgument("add_process_set: ranks or id_out is NULL"));
  }
  int32_t id = -1;
  status = context->AddProcessSet(std::vector<int32_t>(ranks, ranks + num_ranks), &id);
  if (!status.ok()) return Fail(status);
  *id_out = id;
  return TUTTI_OK;
}

tutti_status tutti_remove_process_set(int32_t id) {
  Status status;
  std::shared_ptr<Context> context = GetContext(&status);
  if (!context) return Fail(status);
  status = context->RemoveProcessSet(id);
  if (!status.ok()) return Fail(status);
  return TUTTI_OK;
}

int tutti_process_set_rank(int32_t id) {
  Status status;
  std::shared_ptr<Context> context = GetContext(&status);
  if (!context) {
    Fail(status);
    return -1;
  }
  return context->process_sets().RankIn(id, context->topology().rank);
}

int tutti_process_set_size(int32_t id) {
  Status status;
  std::shared_ptr<Context> context = GetContext(&status);
  if (!context) {
    Fail(status);
    return -1;
  }
  return context->process_sets().Size(id);
}

int tutti_process_set_ranks(int32_t id, int32_t* ranks_out, int32_t capacity) {
  Status status;
  std::shared_ptr<Context> context = GetContext(&status);
  if (!context) {
    Fail(status);
    return -1;
  }
  std::vector<int32_t> ranks;
  if (!context->process_sets().Members(id, &ranks)) return -1;
  for (int32_t i = 0; ranks_out != nullptr && i < capacity && i < (int32_t)ranks.size(); ++i) {
    ranks_out[i] = ranks[i];
  }
  return static_cast<int>(ranks.size());
}

int tutti_mpi_threads_supported(void) { return tutti::MpiThreadMultiple() ? 1 : 0; }

tutti_status tutti_start_timeline(const char* path) {
  if (path == nullptr || path[0] == '\0') {
    return Fail(Status::InvalidArgument("start_timeline: the file name is empty"));
  }
  Status status;
  std::shared_ptr<Context> context = GetContext(&status);
  if (!context) return Fail(status);
  status = context->StartTimeline(path);
  if (!status.ok()) return Fail(status);
  return TUTTI_OK;
}

tutti_status tutti_stop_timeline(void) {
  Status status;
  std::shared_ptr<Context> context = GetContext(&status);
  if (!context) return Fail(status);
  context->StopTimeline();
  return TUTTI_OK;
}

int tutti_counter_count(void) { return tutti::kCounterCount; }

const char* tutti_counter_name(int index) {
  if (index < 0 || index >= tutti::kCounterCount) return nullptr;
  return tutti::kCounterNames[index];
}

int tutti_counters(int64_t* values_out, int capacity) {
  Status status;
  std::shared_ptr<Context> context = GetContext(&status);
  if (!context) {
    Fail(status);
    return -1;
  }
  for (int i = 0; values_out != nullptr && i < capacity && i < tutti::kCounterCount; ++i) {
    values_out[i] = context->counters().Get(static_cast<tutti::Counter>(i));
  }
  return tutti::kCounterCount;
}

}  // extern "C"
