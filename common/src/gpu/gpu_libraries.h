// libcudart and libnccl, loaded at run time (dlopen) so that one core serves machines with and
// without CUDA. Nothing is loaded until a CUDA tensor arrives or a caller asks whether the
// libraries are available (cuda_built(), nccl_built(), tuttirun --check-build).
//
// Where the libraries are looked for, in order:
//   1. TUTTI_CUDART_LIBRARY / TUTTI_NCCL_LIBRARY: a path (only that one is tried);
//   2. the plain sonames (libcudart.so.13, libcudart.so.12, libnccl.so.2): a copy already
//      loaded in the process (torch's), LD_LIBRARY_PATH, the system's ldconfig cache;
//   3. each directory of TUTTI_GPU_LIBRARY_PATH (colon-separated; tutti.common fills it with
//      the nvidia-* pip packages' lib directories it finds on sys.path);
//   4. /usr/local/cuda/lib64 (the CUDA toolkit's default location).
#ifndef TUTTI_SRC_GPU_GPU_LIBRARIES_H_
#define TUTTI_SRC_GPU_GPU_LIBRARIES_H_

#include <string>
#include <vector>

#include "gpu/cuda_decls.h"

namespace tutti {
namespace gpu {

// The CUDA runtime functions the core calls.
struct CudaApi {
  std::string path;  // the file that was loaded
  int runtime_version = 0;  // cudaRuntimeGetVersion, e.g. 13000
  cudaError (*GetDeviceCount)(int*) = nullptr;
  cudaError (*SetDevice)(int) = nullptr;
  cudaError (*GetDevice)(int*) = nullptr;
  const char* (*GetErrorString)(cudaError) = nullptr;
  cudaError (*RuntimeGetVersion)(int*) = nullptr;
  cudaError (*StreamCreateWithFlags)(cudaStream*, unsigned) = nullptr;
  cudaError (*StreamDestroy)(cudaStream) = nullptr;
  cudaError (*StreamSynchronize)(cudaStream) = nullptr;
  cudaError (*StreamWaitEvent)(cudaStream, cudaEvent, unsigned) = nullptr;
  cudaError (*EventCreateWithFlags)(cudaEvent*, unsigned) = nullptr;
  cudaError (*EventDestroy)(cudaEvent) = nullptr;
  cudaError (*EventRecord)(cudaEvent, cudaStream) = nullptr;
  cudaError (*Malloc)(void**, size_t) = nullptr;
  cudaError (*Free)(void*) = nullptr;
  cudaError (*HostAlloc)(void**, size_t, unsigned) = nullptr;
  cudaError (*FreeHost)(void*) = nullptr;
  cudaError (*MemcpyAsync)(void*, const void*, size_t, int, cudaStream) = nullptr;
  // CUDA 13's cudaMemcpyBatchAsync (one call for many copies); null before CUDA 13, whose
  // 12.8 variant has another signature.
  cudaError (*MemcpyBatchAsync)(void* const*, const void* const*, const size_t*, size_t,
                                CudaMemcpyAttributes*, size_t*, size_t, cudaStream) = nullptr;
};

// The NCCL functions the core calls.
struct NcclApi {
  std::string path;
  int version = 0;  // ncclGetVersion, e.g. 23203
  ncclResult (*GetVersion)(int*) = nullptr;
  const char* (*GetErrorString)(ncclResult) = nullptr;
  ncclResult (*GetUniqueId)(NcclUniqueId*) = nullptr;
  ncclResult (*CommInitRank)(ncclComm*, int, NcclUniqueId, int) = nullptr;
  ncclResult (*CommDestroy)(ncclComm) = nullptr;
  ncclResult (*CommAbort)(ncclComm) = nullptr;
  ncclResult (*GroupStart)() = nullptr;
  ncclResult (*GroupEnd)() = nullptr;
  ncclResult (*AllReduce)(const void*, void*, size_t, int, int, ncclComm, cudaStream) = nullptr;
  ncclResult (*Broadcast)(const void*, void*, size_t, int, int, ncclComm, cudaStream) = nullptr;
  ncclResult (*AllGather)(const void*, void*, size_t, int, ncclComm, cudaStream) = nullptr;
  ncclResult (*ReduceScatter)(const void*, void*, size_t, int, int, ncclComm,
                              cudaStream) = nullptr;
  ncclResult (*Reduce)(const void*, void*, size_t, int, int, int, ncclComm, cudaStream) = nullptr;
  ncclResult (*Send)(const void*, size_t, int, int, ncclComm, cudaStream) = nullptr;
  ncclResult (*Recv)(void*, size_t, int, int, ncclComm, cudaStream) = nullptr;
  ncclResult (*RedOpCreatePreMulSum)(int*, void*, int, int, ncclComm) = nullptr;
  ncclResult (*RedOpDestroy)(int, ncclComm) = nullptr;
};

// Loads from the first candidate that opens and has every function; on failure returns false
// and explains in *error what was tried and how to fix it. Each call loads afresh.
bool LoadCudaFrom(const std::vector<std::string>& candidates, CudaApi* api, std::string* error);
bool LoadNcclFrom(const std::vector<std::string>& candidates, NcclApi* api, std::string* error);

// The candidates of the search order above, from the current environment.
std::vector<std::string> CudaCandidates();
std::vector<std::string> NcclCandidates();

// The process's libraries, loaded once (the first call decides); null with the reason in
// *error when they cannot be loaded.
const CudaApi* Cuda(std::string* error);
const NcclApi* Nccl(std::string* error);

}  // namespace gpu
}  // namespace tutti

#endif  // TUTTI_SRC_GPU_GPU_LIBRARIES_H_
