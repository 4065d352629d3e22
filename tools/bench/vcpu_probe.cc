// Which state the machine's CPUs are in, for labelling benchmark launches.
//
//   bazel-bin/tools/bench/vcpu_probe [--seconds 2] [--interval-ms 50] [--json] [--trace]
//
// --trace also prints every sample (seconds since the start, round trip us, memcpy us,
// kernel copy us) as it is taken, to follow the state over minutes (tools/bench/alternate.py
// reads it alongside benchmark launches).
//
// Two processes (this one and a forked child) take samples every interval: the round trip
// of a value through a shared cache line (the child echoes it), a 4 MiB memcpy within this
// process, and a 4 MiB kernel copy out of the child's memory (process_vm_readv, the single
// copy of tutti's shared-memory transport and of Open MPI's). On the 2-vCPU VMs these
// benchmarks run on, the round trip is either about 0.09 us (the vCPUs evidently share one
// core's caches) or about 0.3 us (separate cores), and the host switches between the two
// every few seconds; the copies' speed changes on its own, by up to 4x in the VM's slow
// spells. Small calls and tutti's pipeline for large messages, whose chunks move between the
// ranks' caches, depend on the first (the pipeline runs 4x slower apart); any library's large
// collectives on the second (docs/benchmarks.md, "The CPUs' state" and runs AB). Each launch
// records both before and after it.
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kCopyBytes = size_t(4) << 20;
constexpr int kWarmRoundTrips = 200;
constexpr int kRoundTrips = 1000;
constexpr int64_t kStop = -1;

struct Shared {
  alignas(64) std::atomic<int64_t> value{0};  // odd: the parent's turn to be echoed
  alignas(64) std::atomic<uintptr_t> child_buffer{0};
};

double NowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The child: owns a 4 MiB buffer the parent reads, echoes values while asked to.
void Child(Shared* shared, int wake_fd) {
  std::vector<char> buffer(kCopyBytes, 1);
  shared->child_buffer.store(reinterpret_cast<uintptr_t>(buffer.data()));
  char command = 0;
  while (read(wake_fd, &command, 1) == 1 && command == 'p') {
    for (;;) {
      const int64_t v = shared->value.load(std::memory_order_acquire);
      if (v == kStop) break;
      if (v & 1) shared->value.store(v + 1, std::memory_order_release);
    }
  }
  _exit(0);
}

struct Stats {
  double p50 = 0, p90 = 0, max = 0;
};

Stats Summarize(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.p50 = v[v.size() / 2];
  s.p90 = v[std::min(v.size() - 1, v.size() * 9 / 10)];
  s.max = v.back();
  return s;
}

void Usage() {
  std::fprintf(stderr,
               "usage: vcpu_probe [--seconds S] [--interval-ms MS] [--json] [--trace]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 2.0, interval_ms = 50.0;
  bool json = false, trace = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") {
      json = true;
    } else if (arg == "--trace") {
      trace = true;
    } else if ((arg == "--seconds" || arg == "--interval-ms") && i + 1 < argc) {
      char* end = nullptr;
      const double value = std::strtod(argv[++i], &end);
      if (*end != '\0' || !(value > 0)) Usage();
      (arg == "--seconds" ? seconds : interval_ms) = value;
    } else {
      Usage();
    }
  }
  void* page = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                    -1, 0);
  if (page == MAP_FAILED) {
    std::perror("vcpu_probe: mmap");
    return 1;
  }
  Shared* shared = new (page) Shared();
  int wake[2];
  if (pipe(wake) != 0) {
    std::perror("vcpu_probe: pipe");
    return 1;
  }
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) {
    std::perror("vcpu_probe: fork");
    return 1;
  }
  if (child == 0) {
    // The child may be spinning mid-batch when the parent is killed (alternate.py stops a
    // --trace probe with SIGTERM): it must not outlive the parent, spinning on a CPU.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0);  // the parent died before prctl
    close(wake[1]);
    Child(shared, wake[0]);
  }
  close(wake[0]);
  while (shared->child_buffer.load() == 0) std::this_thread::yield();

  std::vector<char> source(kCopyBytes, 2), target(kCopyBytes, 3);
  std::vector<double> round_trips, copies, kernel_copies;
  bool kernel_copy_works = true;
  const double begin = NowUs(), end = begin + seconds * 1e6;
  while (NowUs() < end) {
    shared->value.store(0);
    if (write(wake[1], "p", 1) != 1) break;
    int64_t v = 0;
    double start = 0;
    for (int i = 0; i < kWarmRoundTrips + kRoundTrips; ++i) {
      if (i == kWarmRoundTrips) start = NowUs();
      shared->value.store(v + 1, std::memory_order_release);
      while (shared->value.load(std::memory_order_acquire) != v + 2) {
      }
      v += 2;
    }
    round_trips.push_back((NowUs() - start) / kRoundTrips);
    shared->value.store(kStop, std::memory_order_release);

    start = NowUs();
    std::memcpy(target.data(), source.data(), kCopyBytes);
    copies.push_back(NowUs() - start);

    if (kernel_copy_works) {
      iovec local{target.data(), kCopyBytes};
      iovec remote{reinterpret_cast<void*>(shared->child_buffer.load()), kCopyBytes};
      start = NowUs();
      const ssize_t got = process_vm_readv(child, &local, 1, &remote, 1, 0);
      if (got == static_cast<ssize_t>(kCopyBytes)) {
        kernel_copies.push_back(NowUs() - start);
      } else {
        kernel_copy_works = false;  // not permitted here (seccomp, ptrace rules)
      }
    }
    if (trace) {
      std::printf("%.2f %.3f %.0f %.0f\n", (NowUs() - begin) / 1e6, round_trips.back(),
                  copies.back(), kernel_copy_works ? kernel_copies.back() : 0.0);
      std::fflush(stdout);  // a trace read while the probe runs, or cut off by a signal
    }
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(interval_ms));
  }
  close(wake[1]);
  waitpid(child, nullptr, 0);

  const Stats rt = Summarize(round_trips), mc = Summarize(copies), kc = Summarize(kernel_copies);
  int outliers = 0;  // kernel copies over twice their median (a copy preempted or stalled)
  for (double k : kernel_copies) outliers += k > 2 * kc.p50 ? 1 : 0;
  if (json) {
    std::printf(
        "{\"samples\": %zu, \"round_trip_us\": {\"p50\": %.3f, \"p90\": %.3f, \"max\": %.3f}, "
        "\"memcpy_4mib_us\": {\"p50\": %.0f, \"p90\": %.0f, \"max\": %.0f}, "
        "\"kernel_copy_4mib_us\": ",
        round_trips.size(), rt.p50, rt.p90, rt.max, mc.p50, mc.p90, mc.max);
    if (kernel_copies.empty()) {
      std::printf("null");
    } else {
      std::printf("{\"p50\": %lld, \"p90\": %lld, \"max\": %lld}",
                  static_cast<long long>(kc.p50), static_cast<long long>(kc.p90),
                  static_cast<long long>(kc.max));
    }
    std::printf(", \"kernel_copy_outliers\": %d}\n", outliers);
  } else {
    std::printf("%zu samples: round trip between processes p50 %.3f us (p90 %.3f); 4 MiB memcpy "
                "p50 %.0f us (p90 %.0f)",
                round_trips.size(), rt.p50, rt.p90, mc.p50, mc.p90);
    if (kernel_copies.empty()) {
      std::printf("; kernel copy not permitted\n");
    } else {
      std::printf("; 4 MiB kernel copy p50 %.0f us (p90 %.0f, %d of %zu over twice the p50)\n",
                  kc.p50, kc.p90, outliers, kernel_copies.size());
    }
  }
  return 0;
}
