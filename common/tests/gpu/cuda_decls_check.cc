// Compiled by tests/core/test_gpu_build.py against the real CUDA and NCCL headers: every value
// the core restates in src/gpu/cuda_decls.h (so that it builds without them) must match.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>

#include "gpu/cuda_decls.h"

namespace g = tutti::gpu;

static_assert(g::kCudaSuccess == cudaSuccess, "cudaSuccess");
static_assert(g::kCudaErrorNoDevice == cudaErrorNoDevice, "cudaErrorNoDevice");
static_assert(g::kCudaErrorInsufficientDriver == cudaErrorInsufficientDriver, "driver");
static_assert(g::kCudaStreamNonBlocking == cudaStreamNonBlocking, "cudaStreamNonBlocking");
static_assert(g::kCudaEventDisableTiming == cudaEventDisableTiming, "cudaEventDisableTiming");
static_assert(g::kCudaHostAllocPortable == cudaHostAllocPortable, "cudaHostAllocPortable");
static_assert(g::kCudaMemcpyHostToDevice == cudaMemcpyHostToDevice, "H2D");
static_assert(g::kCudaMemcpyDeviceToHost == cudaMemcpyDeviceToHost, "D2H");
static_assert(g::kCudaMemcpyDeviceToDevice == cudaMemcpyDeviceToDevice, "D2D");
static_assert(g::kCudaMemcpyDefault == cudaMemcpyDefault, "cudaMemcpyDefault");
static_assert(g::kCudaMemcpySrcAccessOrderStream == cudaMemcpySrcAccessOrderStream, "order");
static_assert(sizeof(g::CudaMemcpyAttributes) == sizeof(cudaMemcpyAttributes), "attributes");
static_assert(offsetof(g::CudaMemcpyAttributes, flags) == offsetof(cudaMemcpyAttributes, flags),
              "attributes.flags");
static_assert(sizeof(g::cudaError) == sizeof(cudaError_t), "cudaError_t");

static_assert(g::kNcclSuccess == ncclSuccess, "ncclSuccess");
static_assert(g::kNcclUniqueIdBytes == NCCL_UNIQUE_ID_BYTES, "NCCL_UNIQUE_ID_BYTES");
static_assert(sizeof(g::NcclUniqueId) == sizeof(ncclUniqueId), "ncclUniqueId");
static_assert(g::kNcclInt8 == ncclInt8 && g::kNcclUint8 == ncclUint8, "8-bit");
static_assert(g::kNcclInt32 == ncclInt32 && g::kNcclUint32 == ncclUint32, "32-bit");
static_assert(g::kNcclInt64 == ncclInt64 && g::kNcclUint64 == ncclUint64, "64-bit");
static_assert(g::kNcclFloat16 == ncclFloat16 && g::kNcclFloat32 == ncclFloat32, "floats");
static_assert(g::kNcclFloat64 == ncclFloat64 && g::kNcclBfloat16 == ncclBfloat16, "floats");
static_assert(g::kNcclSum == ncclSum && g::kNcclProd == ncclProd, "ops");
static_assert(g::kNcclMax == ncclMax && g::kNcclMin == ncclMin && g::kNcclAvg == ncclAvg, "ops");
static_assert(g::kNcclScalarHostImmediate == ncclScalarHostImmediate, "scalar residence");

// The function types the loader casts dlsym results to.
static_assert(sizeof(ncclComm_t) == sizeof(g::ncclComm), "ncclComm_t");
static_assert(sizeof(cudaStream_t) == sizeof(g::cudaStream), "cudaStream_t");

int main() { return 0; }
