// CudaRuntime: the DeviceRuntime on the CUDA runtime library.
#include <string>

#include "gpu/device_runtime.h"

namespace tutti {
namespace gpu {
namespace {

// cudaMemcpyBatchAsync takes at most this many copies per call in practice (the documented
// limit is the count's type; smaller calls keep the attribute arrays on the stack-sized side).
constexpr size_t kMaxCopiesPerBatch = 1024;

}  // namespace

CudaRuntime::~CudaRuntime() {
  for (auto& entry : streams_) cuda_->StreamDestroy(entry.second);
}

Status CudaRuntime::Check(cudaError error, const char* what) const {
  if (error == kCudaSuccess) return Status::OK();
  return Status::Internal(std::string(what) + " failed: " + cuda_->GetErrorString(error) +
                          " (CUDA error " + std::to_string(error) + ")");
}

Status CudaRuntime::SetDevice(int device) {
  return Check(cuda_->SetDevice(device), "cudaSetDevice");
}

Status CudaRuntime::Stream(int device, int index, void** stream) {
  auto key = std::make_pair(device, index);
  auto it = streams_.find(key);
  if (it != streams_.end()) {
    *stream = it->second;
    return Status::OK();
  }
  Status s = SetDevice(device);
  if (!s.ok()) return s;
  cudaStream created = nullptr;
  s = Check(cuda_->StreamCreateWithFlags(&created, kCudaStreamNonBlocking), "cudaStreamCreate");
  if (!s.ok()) return s;
  streams_[key] = created;
  *stream = created;
  return Status::OK();
}

Status CudaRuntime::WaitEvent(void* stream, void* event) {
  return Check(cuda_->StreamWaitEvent(stream, event, 0), "cudaStreamWaitEvent");
}

Status CudaRuntime::RecordEvent(void* event, void* stream) {
  return Check(cuda_->EventRecord(event, stream), "cudaEventRecord");
}

Status CudaRuntime::Copy(void* stream, const std::vector<CopyItem>& copies) {
  for (const CopyItem& c : copies) {
    if (c.bytes == 0) continue;
    Status s = Check(cuda_->MemcpyAsync(c.dst, c.src, c.bytes, kCudaMemcpyDefault, stream),
                     "cudaMemcpyAsync");
    if (!s.ok()) return s;
  }
  return Status::OK();
}

// One cudaMemcpyBatchAsync per batch, all copies device memory read in stream order; without
// it (before CUDA 13), one cudaMemcpyAsync each.
Status CudaRuntime::CopyOnDevice(void* stream, const std::vector<CopyItem>& copies) {
  if (cuda_->MemcpyBatchAsync == nullptr) return Copy(stream, copies);
  for (const std::vector<CopyItem>& batch : SplitBatches(copies, kMaxCopiesPerBatch)) {
    if (batch.size() == 1) {
      const CopyItem& c = batch[0];
      Status s = Check(cuda_->MemcpyAsync(c.dst, c.src, c.bytes, kCudaMemcpyDefault, stream),
                       "cudaMemcpyAsync");
      if (!s.ok()) return s;
      continue;
    }
    std::vector<void*> dsts;
    std::vector<const void*> srcs;
    std::vector<size_t> sizes;
    for (const CopyItem& c : batch) {
      dsts.push_back(c.dst);
      srcs.push_back(c.src);
      sizes.push_back(c.bytes);
    }
    // One attribute for every copy: sources are read in stream order.
    CudaMemcpyAttributes attributes{};
    attributes.src_access_order = kCudaMemcpySrcAccessOrderStream;
    size_t attribute_index = 0;
    Status s = Check(cuda_->MemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), batch.size(),
                                             &attributes, &attribute_index, 1, stream),
                     "cudaMemcpyBatchAsync");
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status CudaRuntime::Synchronize(void* stream) {
  return Check(cuda_->StreamSynchronize(stream), "cudaStreamSynchronize");
}

Status CudaRuntime::AllocateDevice(int device, size_t bytes, void** ptr) {
  Status s = SetDevice(device);
  if (!s.ok()) return s;
  return Check(cuda_->Malloc(ptr, bytes), "cudaMalloc");
}

void CudaRuntime::FreeDevice(void* ptr) {
  if (ptr != nullptr) cuda_->Free(ptr);
}

Status CudaRuntime::AllocatePinned(size_t bytes, void** ptr) {
  return Check(cuda_->HostAlloc(ptr, bytes, kCudaHostAllocPortable), "cudaHostAlloc");
}

void CudaRuntime::FreePinned(void* ptr) {
  if (ptr != nullptr) cuda_->FreeHost(ptr);
}

}  // namespace gpu
}  // namespace tutti
