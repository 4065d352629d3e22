#include "execution/fusion_plan.h"

namespace tutti {
namespace {

bool SameKey(const FusionItem& a, const FusionItem& b) {
  return a.process_set == b.process_set && a.dtype == b.dtype && a.reduce_op == b.reduce_op &&
         a.prescale == b.prescale && a.postscale == b.postscale && a.device == b.device;
}

}  // namespace

std::vector<std::vector<size_t>> PlanFusion(const std::vector<FusionItem>& items,
                                            int64_t threshold_bytes) {
  std::vector<std::vector<size_t>> groups;
  std::vector<int64_t> group_bytes;
  std::vector<size_t> open;  // groups still accepting items (few keys per cycle: a list is fine)
  for (size_t i = 0; i < items.size(); ++i) {
    const FusionItem& item = items[i];
    bool placed = false;
    if (item.fusible) {
      for (size_t& g : open) {
        const FusionItem& first = items[groups[g][0]];
        if (!SameKey(first, item)) continue;
        if (group_bytes[g] + item.bytes <= threshold_bytes) {
          groups[g].push_back(i);
          group_bytes[g] += item.bytes;
          placed = true;
        } else {
          g = groups.size();  // this key's group is full: the new one takes its place
          groups.push_back({i});
          group_bytes.push_back(item.bytes);
          placed = true;
        }
        break;
      }
    }
    if (placed) continue;
    if (item.fusible) open.push_back(groups.size());
    groups.push_back({i});
    group_bytes.push_back(item.bytes);
  }
  return groups;
}

}  // namespace tutti
