// Pinning the core's background thread: TUTTI_THREAD_AFFINITY (or HOROVOD_THREAD_AFFINITY).
#ifndef TUTTI_SRC_THREAD_AFFINITY_H_
#define TUTTI_SRC_THREAD_AFFINITY_H_

#include <string>

#include "base/status.h"

namespace tutti {

// The CPU the background thread of local rank `local_rank` is pinned to, read from the
// variable as Horovod defines it: a comma-separated list of CPU ids, one per local rank.
// *cpu is -1 when the variable is unset; a malformed list or one that names a CPU this
// process may not use is an error that says so.
Status ThreadAffinityCpu(int local_rank, int local_size, int* cpu);

// Pins the calling thread to `cpu` (no-op for -1).
Status PinCurrentThread(int cpu);

}  // namespace tutti

#endif  // TUTTI_SRC_THREAD_AFFINITY_H_
