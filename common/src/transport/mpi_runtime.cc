#include "transport/mpi_runtime.h"

#include <dlfcn.h>
// Only the MPI C API: the C++ bindings would need libmpi_cxx (gone in Open MPI 5).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdlib>
#include <mutex>

#include "base/at_fork.h"

namespace tutti {
namespace {

std::mutex init_mutex;

void FinalizeMpiAtExit() {
  if (tutti::ForkedFrom() != 0) return;  // MPI belongs to the parent (at_fork.h)
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// Python loads the core with RTLD_LOCAL, which would hide libmpi's symbols from the plugins
// Open MPI dlopens during MPI_Init (they expect to resolve against a global libmpi).
// Re-opening the already loaded libmpi with RTLD_GLOBAL | RTLD_NOLOAD promotes it.
void PromoteLibmpiToGlobal() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &info) != 0 && info.dli_fname != nullptr) {
    if (dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) != nullptr) return;
  }
  for (const char* name : {"libmpi.so.40", "libmpi.so.12", "libmpi.so"}) {
    if (dlopen(name, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) != nullptr) return;
  }
}

}  // namespace

std::string MpiErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return "MPI error " + std::to_string(code);
  }
  return std::string(text, length);
}

Status EnsureMpiInitialized(std::string* warning) {
  std::lock_guard<std::mutex> lock(init_mutex);
  warning->clear();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    return Status::Precondition(
        "MPI has already been finalized in this process; tutti cannot use the MPI controller "
        "after MPI_Finalize");
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (!initialized) {
    PromoteLibmpiToGlobal();
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
      return Status::Internal("MPI_Init_thread failed: " + MpiErrorString(rc));
    }
    std::atexit(FinalizeMpiAtExit);
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    *warning =
        "MPI provides a thread level below MPI_THREAD_MULTIPLE (it was initialized before "
        "tutti, or the MPI library lacks thread support); tutti makes MPI calls from its "
        "background thread, so the application must not call MPI concurrently";
  }
  return Status::OK();
}

}  // namespace tutti

namespace tutti {

bool MpiThreadMultiple() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return false;
  int provided = 0;
  MPI_Query_thread(&provided);
  return provided >= MPI_THREAD_MULTIPLE;
}

}  // namespace tutti
