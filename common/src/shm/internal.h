// Helpers shared by the group's files: call kinds (recorded in slot descriptors), phase
// comparison, error propagation, and walking a call's buffer spans.
#ifndef TUTTI_SRC_SHM_INTERNAL_H_
#define TUTTI_SRC_SHM_INTERNAL_H_

#include <algorithm>
#include <cstdint>
#include <vector>

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

// Bits of SlotDesc::plan_flags. A plan of 0 is the pipeline with ordinary stores.
constexpr uint32_t kPlanSingleCopy = 1;  // the deciding rank's plan: the single copy
constexpr uint32_t kTableFits = 2;       // this rank's buffer table fits its slot
constexpr uint32_t kPlanStreaming = 4;   // the plan: streaming stores into the slots
constexpr uint32_t kPlanBits = kPlanSingleCopy | kPlanStreaming;

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

// Addresses of a span: pointers of this process, or integers recorded by a peer.
inline char* Address(const void* p) { return const_cast<char*>(static_cast<const char*>(p)); }
inline char* Address(uint64_t p) { return reinterpret_cast<char*>(static_cast<uintptr_t>(p)); }

// Walks the pieces of the logical range [lo, lo + n) of the concatenation of `spans` (each
// with members in, out and count): fn(offset from lo, input piece, output piece, elements),
// offsets and counts in elements. `starts` holds each span's first element (ascending).
template <typename SpanT, typename Fn>
void ForPieces(const std::vector<SpanT>& spans, const std::vector<int64_t>& starts, size_t es,
               int64_t lo, int64_t n, Fn fn) {
  if (n <= 0) return;
  size_t i = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), lo) -
                                 starts.begin()) - 1;
  for (int64_t at = lo; at < lo + n; ++i) {
    const SpanT& span = spans[i];
    const int64_t within = at - starts[i];
    const int64_t m = std::min(span.count - within, lo + n - at);
    if (m <= 0) continue;  // an empty span
    const size_t skip = static_cast<size_t>(within) * es;
    fn(at - lo, static_cast<const char*>(Address(span.in)) + skip, Address(span.out) + skip, m);
    at += m;
  }
}

}  // namespace internal
}  // namespace shm
}  // namespace tutti

#endif  // TUTTI_SRC_SHM_INTERNAL_H_
