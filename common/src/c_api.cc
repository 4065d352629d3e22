// The C ABI. The only process-wide state of the core lives here: the current context (behind
// a mutex), a count of inits (so each init uses fresh rendezvous keys) and each thread's
// last error message. Everything else belongs to the context.
#include "tutti/c_api.h"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "config.h"
#include "context.h"
#include "dtype.h"
#include "reduce_kernels.h"
#include "status.h"
#include "version.h"

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

thread_local std::string last_error;

tutti_status Fail(const Status& status) {
  last_error = status.message();
  return status.code();
}

Status NotInitialized() {
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

int64_t ElementCount(const tutti_tensor& t) {
  int64_t count = 1;
  for (int32_t i = 0; i < t.ndim; ++i) count *= t.shape[i];
  return count;
}

Status CheckTensor(const char* which, const tutti_tensor* t) {
  if (t == nullptr) return Status::InvalidArgument(std::string(which) + " tensor is NULL");
  if (!tutti::IsValidDtype(t->dtype)) {
    return Status::InvalidArgument(std::string(which) + " tensor has invalid dtype " +
                                   std::to_string(static_cast<int>(t->dtype)));
  }
  if (t->ndim < 0 || (t->ndim > 0 && t->shape == nullptr)) {
    return Status::InvalidArgument(std::string(which) + " tensor has an invalid shape (ndim " +
                                   std::to_string(t->ndim) + ")");
  }
  for (int32_t i = 0; i < t->ndim; ++i) {
    if (t->shape[i] < 0) {
      return Status::InvalidArgument(std::string(which) + " tensor has a negative dimension");
    }
  }
  if (t->data == nullptr && ElementCount(*t) > 0) {
    return Status::InvalidArgument(std::string(which) + " tensor has no data pointer");
  }
  return Status::OK();
}

Status BuildAllreduce(const char* name, const tutti_tensor* input, const tutti_tensor* output,
                      tutti_reduce_op op, double prescale, double postscale, tutti_done_fn done,
                      void* user_data, tutti::PendingOp* pending) {
  if (name == nullptr || name[0] == '\0') {
    return Status::InvalidArgument("allreduce needs a non-empty request name");
  }
  const std::string label = std::string("allreduce of '") + name + "': ";
  if (done == nullptr) return Status::InvalidArgument(label + "the done callback is NULL");
  Status s = CheckTensor("input", input);
  if (s.ok()) s = CheckTensor("output", output);
  if (s.ok()) s = tutti::CheckReduction(input->dtype, op, prescale, postscale);
  if (!s.ok()) return Status(s.code(), label + s.message());
  if (output->dtype != input->dtype) {
    return Status::InvalidArgument(label + "output dtype " + tutti::DtypeName(output->dtype) +
                                   " differs from input dtype " +
                                   tutti::DtypeName(input->dtype));
  }
  bool same_shape = output->ndim == input->ndim;
  for (int32_t i = 0; same_shape && i < input->ndim; ++i) {
    same_shape = output->shape[i] == input->shape[i];
  }
  if (!same_shape) return Status::InvalidArgument(label + "output shape differs from input shape");

  pending->meta.name = name;
  pending->meta.collective = tutti::Collective::kAllreduce;
  pending->meta.reduce_op = op;
  pending->meta.dtype = input->dtype;
  pending->meta.shape.assign(input->shape, input->shape + input->ndim);
  pending->meta.prescale = prescale;
  pending->meta.postscale = postscale;
  pending->input = input->data;
  pending->output = output->data;
  pending->count = ElementCount(*input);
  pending->done = done;
  pending->user_data = user_data;
  return Status::OK();
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
  return (n == "mpi" || n == "gloo") ? 1 : 0;
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
  return context ? context->controller_name() : "";
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
  Status status;
  std::shared_ptr<Context> context = GetContext(&status);
  if (!context) return Fail(status);
  tutti::PendingOp pending;
  status = BuildAllreduce(name, input, output, op, prescale, postscale, done, user_data, &pending);
  if (status.ok()) status = context->Enqueue(std::move(pending));
  if (!status.ok()) return Fail(status);
  return TUTTI_OK;
}

}  // extern "C"
