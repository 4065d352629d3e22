#include "gpu/gpu_libraries.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <sstream>

namespace tutti {
namespace gpu {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::vector<std::string> Candidates(const char* override_var,
                                    const std::vector<std::string>& sonames) {
  const std::string forced = Env(override_var);
  if (!forced.empty()) return {forced};
  std::vector<std::string> result = sonames;
  std::string path = Env("TUTTI_GPU_LIBRARY_PATH");
  std::vector<std::string> dirs;
  std::stringstream split(path);
  for (std::string dir; std::getline(split, dir, ':');) {
    if (!dir.empty()) dirs.push_back(dir);
  }
  dirs.push_back("/usr/local/cuda/lib64");
  for (const std::string& dir : dirs) {
    for (const std::string& soname : sonames) result.push_back(dir + "/" + soname);
  }
  return result;
}

// Opens the first candidate that loads and for which resolve() finds every function.
template <typename Api, typename Resolve>
bool LoadFirst(const char* what, const char* override_var, const char* pip_hint,
               const std::vector<std::string>& candidates, Api* api, std::string* error,
               Resolve resolve) {
  std::string tried;
  for (const std::string& candidate : candidates) {
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* reason = dlerror();
      tried += "\n  " + candidate + ": " + (reason ? reason : "cannot be opened");
      continue;
    }
    Api loaded;
    std::string missing;
    if (!resolve(handle, &loaded, &missing)) {
      tried += "\n  " + candidate + ": lacks " + missing;
      dlclose(handle);
      continue;
    }
    loaded.path = candidate;
    *api = loaded;
    return true;  // the handle stays open for the life of the process
  }
  *error = std::string("cannot load ") + what + "; tried:" + tried + "\nInstall it (" +
           pip_hint + "), or set " + override_var + " to the library's path.";
  return false;
}

template <typename F>
bool Resolve(void* handle, const char* symbol, F* function, std::string* missing) {
  *function = reinterpret_cast<F>(dlsym(handle, symbol));
  if (*function == nullptr && missing->empty()) *missing = symbol;
  return *function != nullptr;
}

}  // namespace

std::vector<std::string> CudaCandidates() {
  return Candidates("TUTTI_CUDART_LIBRARY", {"libcudart.so.13", "libcudart.so.12"});
}

std::vector<std::string> NcclCandidates() {
  return Candidates("TUTTI_NCCL_LIBRARY", {"libnccl.so.2"});
}

bool LoadCudaFrom(const std::vector<std::string>& candidates, CudaApi* api, std::string* error) {
  return LoadFirst(
      "the CUDA runtime (libcudart)", "TUTTI_CUDART_LIBRARY",
      "the NVIDIA driver plus the CUDA toolkit or `pip install nvidia-cuda-runtime`", candidates,
      api, error, [](void* h, CudaApi* a, std::string* missing) {
        bool ok = true;
        ok &= Resolve(h, "cudaGetDeviceCount", &a->GetDeviceCount, missing);
        ok &= Resolve(h, "cudaSetDevice", &a->SetDevice, missing);
        ok &= Resolve(h, "cudaGetDevice", &a->GetDevice, missing);
        ok &= Resolve(h, "cudaGetErrorString", &a->GetErrorString, missing);
        ok &= Resolve(h, "cudaRuntimeGetVersion", &a->RuntimeGetVersion, missing);
        ok &= Resolve(h, "cudaStreamCreateWithFlags", &a->StreamCreateWithFlags, missing);
        ok &= Resolve(h, "cudaStreamDestroy", &a->StreamDestroy, missing);
        ok &= Resolve(h, "cudaStreamSynchronize", &a->StreamSynchronize, missing);
        ok &= Resolve(h, "cudaStreamWaitEvent", &a->StreamWaitEvent, missing);
        ok &= Resolve(h, "cudaEventCreateWithFlags", &a->EventCreateWithFlags, missing);
        ok &= Resolve(h, "cudaEventDestroy", &a->EventDestroy, missing);
        ok &= Resolve(h, "cudaEventRecord", &a->EventRecord, missing);
        ok &= Resolve(h, "cudaMalloc", &a->Malloc, missing);
        ok &= Resolve(h, "cudaFree", &a->Free, missing);
        ok &= Resolve(h, "cudaHostAlloc", &a->HostAlloc, missing);
        ok &= Resolve(h, "cudaFreeHost", &a->FreeHost, missing);
        ok &= Resolve(h, "cudaMemcpyAsync", &a->MemcpyAsync, missing);
        if (!ok) return false;
        // The runtime's version needs no GPU and no driver.
        if (a->RuntimeGetVersion(&a->runtime_version) != kCudaSuccess) a->runtime_version = 0;
        if (a->runtime_version >= 13000) {
          std::string optional;
          Resolve(h, "cudaMemcpyBatchAsync", &a->MemcpyBatchAsync, &optional);
        }
        return true;
      });
}

bool LoadNcclFrom(const std::vector<std::string>& candidates, NcclApi* api, std::string* error) {
  return LoadFirst(
      "NCCL (libnccl)", "TUTTI_NCCL_LIBRARY", "`pip install nvidia-nccl-cu13` or the system's libnccl2",
      candidates, api, error, [](void* h, NcclApi* a, std::string* missing) {
        bool ok = true;
        ok &= Resolve(h, "ncclGetVersion", &a->GetVersion, missing);
        ok &= Resolve(h, "ncclGetErrorString", &a->GetErrorString, missing);
        ok &= Resolve(h, "ncclGetUniqueId", &a->GetUniqueId, missing);
        ok &= Resolve(h, "ncclCommInitRank", &a->CommInitRank, missing);
        ok &= Resolve(h, "ncclCommDestroy", &a->CommDestroy, missing);
        ok &= Resolve(h, "ncclCommAbort", &a->CommAbort, missing);
        ok &= Resolve(h, "ncclGroupStart", &a->GroupStart, missing);
        ok &= Resolve(h, "ncclGroupEnd", &a->GroupEnd, missing);
        ok &= Resolve(h, "ncclAllReduce", &a->AllReduce, missing);
        ok &= Resolve(h, "ncclBroadcast", &a->Broadcast, missing);
        ok &= Resolve(h, "ncclAllGather", &a->AllGather, missing);
        ok &= Resolve(h, "ncclReduceScatter", &a->ReduceScatter, missing);
        ok &= Resolve(h, "ncclReduce", &a->Reduce, missing);
        ok &= Resolve(h, "ncclSend", &a->Send, missing);
        ok &= Resolve(h, "ncclRecv", &a->Recv, missing);
        ok &= Resolve(h, "ncclRedOpCreatePreMulSum", &a->RedOpCreatePreMulSum, missing);
        ok &= Resolve(h, "ncclRedOpDestroy", &a->RedOpDestroy, missing);
        if (!ok) return false;
        if (a->GetVersion(&a->version) != kNcclSuccess) a->version = 0;
        return true;
      });
}

const CudaApi* Cuda(std::string* error) {
  static std::once_flag once;
  static CudaApi api;
  static bool loaded = false;
  static std::string reason;
  std::call_once(once, [] { loaded = LoadCudaFrom(CudaCandidates(), &api, &reason); });
  if (!loaded && error != nullptr) *error = reason;
  return loaded ? &api : nullptr;
}

const NcclApi* Nccl(std::string* error) {
  static std::once_flag once;
  static NcclApi api;
  static bool loaded = false;
  static std::string reason;
  std::call_once(once, [] { loaded = LoadNcclFrom(NcclCandidates(), &api, &reason); });
  if (!loaded && error != nullptr) *error = reason;
  return loaded ? &api : nullptr;
}

}  // namespace gpu
}  // namespace tutti
