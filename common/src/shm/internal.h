// Helpers shared by the group's files: call kinds (recorded in slot descriptors), phase
// comparison, and error propagation.
#ifndef TUTTI_SRC_SHM_INTERNAL_H_
#define TUTTI_SRC_SHM_INTERNAL_H_

#include <algorithm>
#include <cstdint>

#include "base/status.h"

namespace tutti {
namespace shm {
namespace internal {

enum Kind : uint32_t {
  kAllreduce = 1,
  kBroadcast = 2,
  kAllgather = 3,
  kAlltoall = 4,
  kBarrier = 5,
  kAllreduceScratch = 6,
};

inline const char* KindName(uint32_t kind) {
  switch (kind) {
    case kAllreduce: return "allreduce";
    case kBroadcast: return "broadcast";
    case kAllgather: return "allgather";
    case kAlltoall: return "alltoall";
    case kBarrier: return "barrier";
    case kAllreduceScratch: return "allreduce on scratch memory";
  }
  return "an unknown call";
}

// True when a counter holding `value` has reached phase `target` (wrap-safe).
inline bool Reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}

// Returns the status of `expr` from the calling function unless it is OK.
#define SHM_RETURN_IF_ERROR(expr) \
  do {                            \
    ::tutti::Status _s = (expr);  \
    if (!_s.ok()) return _s;      \
  } while (0)

// Length of [begin, end) intersected with [lo, lo + n).
inline int64_t Overlap(int64_t begin, int64_t end, int64_t lo, int64_t n, int64_t* start) {
  *start = std::max(begin, lo);
  return std::max<int64_t>(0, std::min(end, lo + n) - *start);
}

}  // namespace internal
}  // namespace shm
}  // namespace tutti

#endif  // TUTTI_SRC_SHM_INTERNAL_H_
