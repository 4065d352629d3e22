#include "gpu/copy_plan.h"

namespace tutti {
namespace gpu {

PackedLayout PackTensors(const std::vector<size_t>& bytes, size_t alignment) {
  PackedLayout layout;
  if (alignment == 0) alignment = 1;
  size_t offset = 0;
  for (size_t b : bytes) {
    offset = (offset + alignment - 1) / alignment * alignment;
    layout.offsets.push_back(offset);
    offset += b;
  }
  layout.total_bytes = offset;
  return layout;
}

std::vector<CopyItem> CopiesIn(const PackedLayout& layout, const std::vector<const void*>& sources,
                               const std::vector<size_t>& bytes, char* buffer) {
  std::vector<CopyItem> copies;
  for (size_t i = 0; i < sources.size(); ++i) {
    char* slot = buffer + layout.offsets[i];
    if (bytes[i] == 0 || slot == sources[i]) continue;
    copies.push_back({slot, sources[i], bytes[i]});
  }
  return copies;
}

std::vector<CopyItem> CopiesOut(const PackedLayout& layout, const std::vector<void*>& targets,
                                const std::vector<size_t>& bytes, const char* buffer) {
  std::vector<CopyItem> copies;
  for (size_t i = 0; i < targets.size(); ++i) {
    const char* slot = buffer + layout.offsets[i];
    if (bytes[i] == 0 || slot == targets[i]) continue;
    copies.push_back({targets[i], slot, bytes[i]});
  }
  return copies;
}

std::vector<std::vector<CopyItem>> SplitBatches(const std::vector<CopyItem>& copies,
                                                size_t max_per_call) {
  std::vector<std::vector<CopyItem>> batches;
  if (max_per_call == 0) max_per_call = 1;
  for (const CopyItem& c : copies) {
    if (c.bytes == 0) continue;
    if (batches.empty() || batches.back().size() == max_per_call) batches.emplace_back();
    batches.back().push_back(c);
  }
  return batches;
}

}  // namespace gpu
}  // namespace tutti
