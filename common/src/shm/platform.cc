#include "shm/platform.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tutti {
namespace shm {
namespace {

// Reads /proc/<pid>/stat: the state letter and the start time. False if it cannot be read
// (the process no longer exists, or /proc is not mounted).
bool ReadProcStat(int64_t pid, char* state, uint64_t* start_ticks) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%lld/stat", static_cast<long long>(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // The command name (field 2) is in parentheses and may contain anything; fields after the
  // last ')' are plain numbers: state is field 3, starttime field 22.
  char* p = std::strrchr(buf, ')');
  if (p == nullptr) return false;
  ++p;
  int field = 2;
  char* save = nullptr;
  for (char* tok = strtok_r(p, " ", &save); tok != nullptr; tok = strtok_r(nullptr, " ", &save)) {
    ++field;
    if (field == 3) *state = tok[0];
    if (field == 22) {
      *start_ticks = std::strtoull(tok, nullptr, 10);
      return true;
    }
  }
  return false;
}

}  // namespace

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) {
  if (timeout_ns <= 0) return;
  timespec ts;
  ts.tv_sec = timeout_ns / 1000000000;
  ts.tv_nsec = timeout_ns % 1000000000;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

int UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

int CurrentCpu() { return sched_getcpu(); }

bool MoveOffCpu(int cpu) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof(allowed), &allowed) != 0 ||
      !CPU_ISSET(cpu, &allowed) || CPU_COUNT(&allowed) < 2 || sched_getcpu() != cpu) {
    return false;
  }
  cpu_set_t elsewhere = allowed;
  CPU_CLR(cpu, &elsewhere);
  // Leaving `cpu` out of the mask migrates the thread at once; putting the mask back does
  // not move it again.
  const bool moved = sched_setaffinity(0, sizeof(elsewhere), &elsewhere) == 0;
  sched_setaffinity(0, sizeof(allowed), &allowed);
  return moved;
}

ProcessId SelfProcessId() {
  ProcessId id;
  id.pid = ::getpid();
  char state = 0;
  if (!ReadProcStat(id.pid, &state, &id.start_ticks)) id.start_ticks = 0;
  return id;
}

bool ProcessGone(const ProcessId& id) {
  if (id.pid <= 0) return false;
  if (::kill(static_cast<pid_t>(id.pid), 0) != 0 && errno == ESRCH) return true;
  char state = 0;
  uint64_t start = 0;
  if (!ReadProcStat(id.pid, &state, &start)) {
    // No /proc entry although kill() found it: only possible without /proc; trust kill().
    return false;
  }
  if (state == 'Z' || state == 'X' || state == 'x') return true;
  return id.start_ticks != 0 && start != id.start_ticks;
}

int64_t ReadPeerMemory(int64_t pid, const iovec* local, int local_count, const iovec* remote,
                       int remote_count) {
  const ssize_t n = process_vm_readv(static_cast<pid_t>(pid), local, static_cast<unsigned long>(local_count),
                                     remote, static_cast<unsigned long>(remote_count), 0);
  return n < 0 ? -static_cast<int64_t>(errno) : static_cast<int64_t>(n);
}

int64_t WritePeerMemory(int64_t pid, const iovec* local, int local_count, const iovec* remote,
                        int remote_count) {
  const ssize_t n =
      process_vm_writev(static_cast<pid_t>(pid), local, static_cast<unsigned long>(local_count),
                        remote, static_cast<unsigned long>(remote_count), 0);
  return n < 0 ? -static_cast<int64_t>(errno) : static_cast<int64_t>(n);
}

void AllowPeerReads() {
#if defined(PR_SET_PTRACER)
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);  // EINVAL without Yama: nothing to lift
#endif
}

}  // namespace shm
}  // namespace tutti
