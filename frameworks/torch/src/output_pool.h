// Storage for the outputs the core allocates (allgather, alltoall, reducescatter, ...),
// reused once the caller has dropped them.
//
// torch's CPU allocator gives large blocks back to the system when they are freed, so every
// fresh output of a few megabytes pays one page fault per 4 KiB page (about 2000 for 8 MiB):
// on small VMs more than the collective itself (a 128 MiB output: 32768 faults, about 50 ms
// of a 75 ms allgather). The pool keeps recent CPU blocks of
// kMinBytes..kMaxBlockBytes, at most kMaxPoolBytes together, and hands a block out again
// only while it holds the block's only reference: a tensor the caller still holds, or any
// view of it, is never written.
#ifndef TUTTI_TORCH_OUTPUT_POOL_H_
#define TUTTI_TORCH_OUTPUT_POOL_H_

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>

namespace tutti_torch {

class OutputPool {
 public:
  static constexpr size_t kMinBytes = size_t(1) << 20;
  static constexpr size_t kMaxBlockBytes = size_t(128) << 20;
  static constexpr size_t kMaxPoolBytes = size_t(128) << 20;

  // The process-wide pool. Never destroyed (tensors must not be freed during static
  // destruction, when torch may be gone).
  static OutputPool& Instance();

  // A contiguous 1-D tensor of `numel` (> 0) elements of `dtype` on `device`; a free block of
  // exactly that dtype and size when the pool has one.
  at::Tensor Take(at::ScalarType dtype, int64_t numel, const at::Device& device);

 private:
  static bool Free(const at::Tensor& block);

  std::mutex mutex_;
  std::deque<at::Tensor> blocks_;  // least recently handed out first
  size_t bytes_ = 0;
};

}  // namespace tutti_torch

#endif  // TUTTI_TORCH_OUTPUT_POOL_H_
