// Counters of what the core did, readable from any thread (tutti_counters in the C ABI), and
// the settings currently in force (which autotune changes).
#ifndef TUTTI_SRC_COUNTERS_H_
#define TUTTI_SRC_COUNTERS_H_

#include <atomic>
#include <cstdint>

namespace tutti {

enum Counter : int {
  kCycles = 0,          // negotiation cycles (one flag exchange each)
  kNegotiations,        // cycles that also went through the coordinator
  kCacheHits,           // requests matched in the response cache
  kCacheMisses,         // requests sent to the coordinator
  kCacheInvalidations,  // cache entries dropped because a request changed (or went stale)
  kRequestsDone,        // requests completed (any outcome)
  kAllreduceCollectives,  // transport allreduce calls for allreduce requests
  kFusedTensors,        // tensors reduced in a collective shared with others
  kFusedBytes,          // bytes of those tensors
  kAllreduceBytes,      // bytes of every allreduced tensor
  kStallWarnings,       // stall reports logged
  kCallerCycles,        // cycles run by a thread inside tutti_run, not the core's thread
  kFollowUpCycles,      // cycles opened at once for requests in flight (Context::FollowUpDue)
  kShmSingleCopyCalls,  // shared-memory collectives that took the single copy (Transport)
  kShmStreamingCalls,   // shared-memory allreduces whose pipeline streamed into its slots
  kShmCpuMoves,         // moves off a CPU shared with a same-host peer (Transport::CpuMoves)
  // Settings in force (gauges).
  kCycleTimeMicros,
  kFusionThresholdBytes,
  kCacheEnabled,
  kAutotuneSamples,
  kAutotuneConverged,
  kCounterCount
};

// Names in the order of the enum (used by the C ABI and the Python API).
extern const char* const kCounterNames[kCounterCount];

struct Counters {
  std::atomic<int64_t> values[kCounterCount] = {};
  void Add(Counter c, int64_t n = 1) { values[c].fetch_add(n, std::memory_order_relaxed); }
  void Set(Counter c, int64_t v) { values[c].store(v, std::memory_order_relaxed); }
  int64_t Get(Counter c) const { return values[c].load(std::memory_order_relaxed); }
};

}  // namespace tutti

#endif  // TUTTI_SRC_COUNTERS_H_
