// Where each tensor of a fused or staged collective lives in a shared buffer, and the batched
// copies that move it there and back. Pure planning: no device calls, so it is unit-tested on
// the CPU.
#ifndef TUTTI_SRC_GPU_COPY_PLAN_H_
#define TUTTI_SRC_GPU_COPY_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tutti {
namespace gpu {

// One copy of a batch.
struct CopyItem {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
};

// Tensors packed one after another. Offsets are multiples of `alignment` in bytes; for a
// fused reduction pass alignment == element size, so the buffer is one dense array of
// elements that a single collective reduces.
struct PackedLayout {
  std::vector<size_t> offsets;  // one per tensor
  size_t total_bytes = 0;
};
PackedLayout PackTensors(const std::vector<size_t>& bytes, size_t alignment);

// Copies of each tensor into its slot of `buffer` (empty tensors and tensors that already sit
// in their slot are skipped).
std::vector<CopyItem> CopiesIn(const PackedLayout& layout, const std::vector<const void*>& sources,
                               const std::vector<size_t>& bytes, char* buffer);
// Copies of each slot of `buffer` back to its tensor.
std::vector<CopyItem> CopiesOut(const PackedLayout& layout, const std::vector<void*>& targets,
                                const std::vector<size_t>& bytes, const char* buffer);

// A batch split into runs that one batched-copy call may take (cudaMemcpyBatchAsync accepts
// at most `max_per_call` copies, and copies of 0 bytes are not allowed).
std::vector<std::vector<CopyItem>> SplitBatches(const std::vector<CopyItem>& copies,
                                                size_t max_per_call);

}  // namespace gpu
}  // namespace tutti

#endif  // TUTTI_SRC_GPU_COPY_PLAN_H_
