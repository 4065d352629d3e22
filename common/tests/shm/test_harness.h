// Test support for the shared-memory group (used by common/tests/shm/ only): runs a function
// in N forked processes that each create a Group with the same unique segment name, using a
// barrier that lives in an anonymous shared mapping created before the fork. Everything has a
// deadline, so a broken transport fails a test instead of hanging it.
#ifndef TUTTI_SRC_SHM_TEST_HARNESS_H_
#define TUTTI_SRC_SHM_TEST_HARNESS_H_

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "shm/group.h"
#include "shm/platform.h"

namespace tutti {
namespace shm {
namespace testing {

// In a child: prints where and why a check failed and makes the body return false.
#define SHM_CHECK(cond, ...)                                  \
  do {                                                        \
    if (!(cond)) {                                            \
      std::fprintf(stderr, "rank %d: ", rank);                \
      std::fprintf(stderr, __VA_ARGS__);                      \
      std::fprintf(stderr, " [%s:%d]\n", __FILE__, __LINE__); \
      return false;                                           \
    }                                                         \
  } while (0)

// Small chunks so that tests cross many chunk and ring boundaries cheaply.
inline Group::Options SmallChunkOptions() {
  Group::Options o;
  o.chunk_bytes = 16 * 1024;
  o.small_bytes = 4 * 1024;
  o.timeout_seconds = 20;
  return o;
}

// The same, with every call above small_bytes reading the peers' buffers (single copy).
inline Group::Options SingleCopyOptions() {
  Group::Options o = SmallChunkOptions();
  o.single_copy = Group::Options::SingleCopy::kAlways;
  o.single_copy_bytes = 1;
  return o;
}

// Whether this kernel lets a process read a forked sibling's memory (process_vm_readv), tested
// without the group: where it does, the group must find out so too.
inline bool KernelAllowsSingleCopy() {
  static uint64_t word = 0x7475747469ULL;
  int ready[2];
  if (pipe(ready) != 0) return false;
  const pid_t child = fork();
  if (child == 0) {
    char c;
    close(ready[1]);
    if (read(ready[0], &c, 1) < 0) _exit(1);  // returns when the parent closes its end
    _exit(0);
  }
  close(ready[0]);
  uint64_t got = 0;
  iovec local{&got, sizeof(got)}, remote{&word, sizeof(word)};
  const bool ok = child > 0 && ReadPeerMemory(child, &local, 1, &remote, 1) == 8 && got == word;
  close(ready[1]);
  if (child > 0) waitpid(child, nullptr, 0);
  return ok;
}

// In a test body: skips the test where the kernel forbids single copies (tests of the
// single copy itself; where it is allowed, they must find it used).
#define SKIP_UNLESS_SINGLE_COPY_POSSIBLE()                                                \
  if (!::tutti::shm::testing::KernelAllowsSingleCopy())                                  \
  GTEST_SKIP() << "this kernel forbids process_vm_readv between sibling processes (Yama " \
                  "ptrace_scope or seccomp)"

// Memory shared by the test process and its forked children.
template <typename T>
T* SharedNew() {
  void* p = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) std::abort();
  return new (p) T();
}
template <typename T>
void SharedDelete(T* p) {
  p->~T();
  munmap(p, sizeof(T));
}

// A sense-reversing barrier for forked processes, with a deadline.
struct ForkBarrier {
  std::atomic<int> arrived{0};
  std::atomic<uint32_t> generation{0};

  Status Wait(int n, double timeout_seconds = 20) {
    const uint32_t gen = generation.load(std::memory_order_acquire);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
      arrived.store(0, std::memory_order_relaxed);
      generation.fetch_add(1, std::memory_order_release);
      return Status::OK();
    }
    const int64_t deadline = NowNs() + static_cast<int64_t>(timeout_seconds * 1e9);
    for (int i = 0; generation.load(std::memory_order_acquire) == gen; ++i) {
      if (NowNs() > deadline) return Status::Aborted("test barrier timed out");
      if (i < 1000) {
        sched_yield();
      } else {
        usleep(100);
      }
    }
    return Status::OK();
  }
};

// Data the children report to the parent.
struct Shared {
  ForkBarrier barrier;
  std::atomic<int64_t> marks[64];     // test-defined (e.g. times)
  std::atomic<uint64_t> digests[16];  // per rank: a hash of every result it received
  char name[64];                      // the segment name
};

inline uint64_t Fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ULL) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

// "/tutti-test-<pid>-" plus a per-process counter: unique per test, and the prefix finds any
// leftover of this test process in /dev/shm.
inline std::string SegmentPrefix() { return "tutti-test-" + std::to_string(getpid()) + "-"; }
inline std::string UniqueName() {
  static int counter = 0;
  return "/" + SegmentPrefix() + std::to_string(++counter);
}

// Names in /dev/shm left by this test process.
inline std::vector<std::string> Leftovers() {
  std::vector<std::string> found;
  const std::string prefix = SegmentPrefix();
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* e = readdir(dir)) {
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) found.push_back(e->d_name);
    }
    closedir(dir);
  }
  return found;
}

struct RunOptions {
  Group::Options group;
  double timeout_seconds = 40;  // the whole run
  // Called in the parent after forking, with the children's pids (e.g. to kill one).
  std::function<void(const std::vector<pid_t>&, Shared*)> parent;
  // Every rank must have recorded the same digest of its results.
  bool same_digests = true;
  // Ranks the parent reaps only after all others exited (a killed rank then stays a zombie
  // while the others run, as under a launcher that reaps late); they are killed with SIGKILL
  // at that point if still running (a stopped rank).
  std::vector<int> reap_last;
  // Adjusts a rank's group options (e.g. to make them disagree).
  std::function<void(int, Group::Options*)> rank_options;
  // Exit status expected per rank (default 0); -SIG for "killed by SIG".
  std::vector<int> expected_exit;
};

// Runs body(rank, group, shared) in `n` children after Group::Create. A child exits with 0
// when body returns true; the result is "" when every child ended as expected, or a
// description of what went wrong.
inline std::string RunGroup(int n, const std::function<bool(int, Group*, Shared*)>& body,
                            RunOptions options = RunOptions()) {
  Shared* shared = SharedNew<Shared>();
  const std::string name = UniqueName();
  std::snprintf(shared->name, sizeof(shared->name), "%s", name.c_str());
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < n; ++rank) {
    pid_t pid = fork();
    if (pid == 0) {
      std::unique_ptr<Group> group;
      Group::Options group_options = options.group;
      if (options.rank_options) options.rank_options(rank, &group_options);
      Status st = Group::Create(
          name, rank, n, group_options, [&] { return shared->barrier.Wait(n); }, &group);
      bool ok = false;
      if (!st.ok()) {
        std::fprintf(stderr, "rank %d: Create failed: %s\n", rank, st.message().c_str());
      } else {
        ok = body(rank, group.get(), shared);
      }
      std::fflush(nullptr);
      _exit(ok ? 0 : 1);
    }
    pids.push_back(pid);
  }
  if (options.parent) options.parent(pids, shared);
  std::string problems;
  std::vector<bool> reaped(n, false);
  const int64_t deadline = NowNs() + static_cast<int64_t>(options.timeout_seconds * 1e9);
  int remaining = n;
  while (remaining > 0) {
    bool others_done = true;
    for (int r = 0; r < n; ++r) {
      bool last = false;
      for (int x : options.reap_last) last |= (x == r);
      if (!reaped[r] && !last) others_done = false;
    }
    if (others_done) {
      for (int r : options.reap_last) {
        if (!reaped[r]) kill(pids[r], SIGKILL);
      }
    }
    for (int r = 0; r < n; ++r) {
      if (reaped[r]) continue;
      bool last = false;
      for (int x : options.reap_last) last |= (x == r);
      if (last && !others_done) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      reaped[r] = true;
      --remaining;
      const int expected =
          r < static_cast<int>(options.expected_exit.size()) ? options.expected_exit[r] : 0;
      const int got = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      if (got != expected) {
        problems += "rank " + std::to_string(r) + " ended with " + std::to_string(got) +
                    " (expected " + std::to_string(expected) + "); ";
      }
    }
    if (remaining > 0 && NowNs() > deadline) {
      for (int r = 0; r < n; ++r) {
        if (!reaped[r]) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], nullptr, 0);
          problems += "rank " + std::to_string(r) + " did not finish in time; ";
        }
      }
      break;
    }
    if (remaining > 0) usleep(2000);
  }
  if (options.same_digests) {
    for (int r = 1; r < n; ++r) {
      if (shared->digests[r].load() != shared->digests[0].load()) {
        problems += "rank " + std::to_string(r) + " received other results than rank 0; ";
      }
    }
  }
  for (const std::string& left : Leftovers()) problems += "left in /dev/shm: " + left + "; ";
  SharedDelete(shared);
  return problems;
}

}  // namespace testing
}  // namespace shm
}  // namespace tutti

#endif  // TUTTI_SRC_SHM_TEST_HARNESS_H_
