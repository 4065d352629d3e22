// The few CUDA runtime and NCCL declarations the core uses, restated so that the core compiles
// without the CUDA or NCCL headers and loads both libraries only at run time (gpu_libraries.h).
// Every value below is part of the libraries' stable C ABI; gpu_decls_test compiles against the
// real cuda_runtime_api.h and nccl.h (when present) and checks each one.
#ifndef TUTTI_SRC_GPU_CUDA_DECLS_H_
#define TUTTI_SRC_GPU_CUDA_DECLS_H_

#include <cstddef>
#include <cstdint>

namespace tutti {
namespace gpu {

// ---- CUDA runtime ----
using cudaError = int;  // cudaError_t
using cudaStream = void*;  // cudaStream_t
using cudaEvent = void*;   // cudaEvent_t
constexpr cudaError kCudaSuccess = 0;
constexpr cudaError kCudaErrorNoDevice = 100;
constexpr cudaError kCudaErrorInsufficientDriver = 35;
constexpr unsigned kCudaStreamNonBlocking = 0x01;
constexpr unsigned kCudaEventDisableTiming = 0x02;
constexpr unsigned kCudaHostAllocPortable = 0x01;
// cudaMemcpyKind
constexpr int kCudaMemcpyHostToDevice = 1;
constexpr int kCudaMemcpyDeviceToHost = 2;
constexpr int kCudaMemcpyDeviceToDevice = 3;
constexpr int kCudaMemcpyDefault = 4;
// cudaMemcpyAttributes for cudaMemcpyBatchAsync (CUDA 12.8+).
struct CudaMemLocation {
  int type;  // cudaMemLocationType; 0 (invalid) = no hint
  int id;
};
struct CudaMemcpyAttributes {
  int src_access_order;  // cudaMemcpySrcAccessOrder
  CudaMemLocation src_loc_hint;
  CudaMemLocation dst_loc_hint;
  unsigned flags;
};
constexpr int kCudaMemcpySrcAccessOrderStream = 1;

// ---- NCCL ----
using ncclResult = int;  // ncclResult_t
using ncclComm = void*;  // ncclComm_t
constexpr ncclResult kNcclSuccess = 0;
constexpr size_t kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct NcclUniqueId {
  char internal[kNcclUniqueIdBytes];
};
// ncclDataType_t
enum NcclDataType : int {
  kNcclInt8 = 0,
  kNcclUint8 = 1,
  kNcclInt32 = 2,
  kNcclUint32 = 3,
  kNcclInt64 = 4,
  kNcclUint64 = 5,
  kNcclFloat16 = 6,
  kNcclFloat32 = 7,
  kNcclFloat64 = 8,
  kNcclBfloat16 = 9,
};
// ncclRedOp_t
enum NcclRedOp : int {
  kNcclSum = 0,
  kNcclProd = 1,
  kNcclMax = 2,
  kNcclMin = 3,
  kNcclAvg = 4,
};
// ncclScalarResidence_t
constexpr int kNcclScalarHostImmediate = 1;

}  // namespace gpu
}  // namespace tutti

#endif  // TUTTI_SRC_GPU_CUDA_DECLS_H_
