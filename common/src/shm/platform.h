// Operating-system pieces of the shared-memory transport: futexes on words inside a shared
// mapping, a monotonic clock, the number of usable CPUs, and process identity for peer
// liveness checks.
#ifndef TUTTI_SRC_SHM_PLATFORM_H_
#define TUTTI_SRC_SHM_PLATFORM_H_

#include <sys/uio.h>

#include <atomic>
#include <cstdint>

namespace tutti {
namespace shm {

// Nanoseconds on CLOCK_MONOTONIC (one clock for every process on the host).
int64_t NowNs();

// Sleeps while *word == expected, at most timeout_ns. The word lives in a MAP_SHARED mapping,
// so this is a process-shared futex (not FUTEX_PRIVATE). Returns early on a wake, a signal or
// a changed value; the caller re-checks.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns);
// Wakes every process sleeping on `word`.
void FutexWake(std::atomic<uint32_t>* word);

// CPUs this process may run on (sched_getaffinity), at least 1.
int UsableCpus();

// The CPU the calling thread runs on at this moment, or -1 where the system cannot say.
int CurrentCpu();
// Moves the calling thread off `cpu` onto another CPU it may run on, then gives it back its
// affinity mask unchanged (the thread stays where it landed until the scheduler moves it).
// False, and nothing changes, when the thread may run on no other CPU or is not on `cpu`.
bool MoveOffCpu(int cpu);

// Identity of a process: its pid and its start time in clock ticks since boot (field 22 of
// /proc/<pid>/stat), so that a recycled pid is not mistaken for the original process.
struct ProcessId {
  int64_t pid = 0;
  uint64_t start_ticks = 0;
};
ProcessId SelfProcessId();
// True when `id` has exited, has been killed (also while it is an unreaped zombie), or its
// pid now belongs to another process.
bool ProcessGone(const ProcessId& id);

// Copies from another process's memory into this one's with one kernel copy
// (process_vm_readv): `remote` and `local` list the same number of bytes. Returns the bytes
// copied (fewer when a remote range is not mapped), or -errno: EPERM where the kernel or a
// security policy (Yama, seccomp) forbids it, ESRCH when the process is gone.
int64_t ReadPeerMemory(int64_t pid, const iovec* local, int local_count, const iovec* remote,
                       int remote_count);
// The same in the other direction (process_vm_writev): from this process's `local` into
// another's `remote`.
int64_t WritePeerMemory(int64_t pid, const iovec* local, int local_count, const iovec* remote,
                        int remote_count);
// Lets processes of this user read this one's memory where Yama (ptrace_scope 1, the default
// of several distributions) would limit that to its ancestors, as Open MPI's single copy
// does; without Yama it changes nothing.
void AllowPeerReads();

// A pause instruction for spin loops.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace shm
}  // namespace tutti

#endif  // TUTTI_SRC_SHM_PLATFORM_H_
