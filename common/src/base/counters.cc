#include "base/counters.h"

namespace tutti {

const char* const kCounterNames[kCounterCount] = {
    "cycles",
    "negotiations",
    "cache_hits",
    "cache_misses",
    "cache_invalidations",
    "requests_done",
    "allreduce_collectives",
    "fused_tensors",
    "fused_bytes",
    "allreduce_bytes",
    "stall_warnings",
    "caller_cycles",
    "follow_up_cycles",
    "shm_single_copy_calls",
    "shm_streaming_calls",
    "shm_cpu_moves",
    "cycle_time_us",
    "fusion_threshold_bytes",
    "cache_enabled",
    "autotune_samples",
    "autotune_converged",
};

}  // namespace tutti
