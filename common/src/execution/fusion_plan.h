// Which ready allreduce requests share one transport call. Pure planning, identical on every
// member because it sees only negotiated facts (the order of responses, dtypes, ops, scale
// factors, sizes).
#ifndef TUTTI_SRC_FUSION_PLAN_H_
#define TUTTI_SRC_FUSION_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tutti/c_api.h"

namespace tutti {

struct FusionItem {
  bool fusible = false;  // an allreduce without joined ranks
  int32_t process_set = 0;
  tutti_dtype dtype = TUTTI_FLOAT32;
  tutti_reduce_op reduce_op = TUTTI_REDUCE_SUM;
  double prescale = 1.0;
  double postscale = 1.0;
  int64_t bytes = 0;
  int32_t device = -1;  // CUDA ordinal, -1 for host memory: only one device's tensors fuse
};

// Groups of item indices in execution order (a group runs at the position of its first
// item). Fusible items with the same set, dtype, op and scale factors share a group while
// its total stays within `threshold_bytes`; anything else is a group of its own.
std::vector<std::vector<size_t>> PlanFusion(const std::vector<FusionItem>& items,
                                            int64_t threshold_bytes);

}  // namespace tutti

#endif  // TUTTI_SRC_FUSION_PLAN_H_
