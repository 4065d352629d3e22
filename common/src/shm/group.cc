// Same-host collectives through one POSIX shared-memory segment per group. The protocol
// (creation and cleanup, synchronisation, the protocols by size, waiting, failure detection)
// is described once, in docs/architecture.md, section "Same-host shared memory"; the
// segment's offsets are in layout.h.
#include "shm/group.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "shm/internal.h"
#include "shm/layout.h"
#include "shm/platform.h"

namespace tutti {
namespace shm {

using internal::KindName;
using internal::Reached;

namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// The size from which calls may take a single copy, as every rank must agree on it.
uint64_t SingleCopyBytes(const Group::Options& options) {
  if (options.single_copy == Group::Options::SingleCopy::kNever) return 0;
  return std::max<uint64_t>(1, options.single_copy_bytes);
}

}  // namespace

size_t Group::SegmentBytes(int size, const Options& options) {
  return Layout(size, options.chunk_bytes, options.ring_slots, options.scratch_bytes).total;
}

Status Group::Create(const std::string& name, int rank, int size, const Options& options,
                     const std::function<Status()>& barrier, std::unique_ptr<Group>* out) {
  out->reset();
  if (size < 1 || rank < 0 || rank >= size) {
    return Status::InvalidArgument("shared-memory group: rank " + std::to_string(rank) +
                                   " is not in a group of " + std::to_string(size));
  }
  if (name.size() < 2 || name.size() > 200 || name[0] != '/' ||
      name.find('/', 1) != std::string::npos) {
    return Status::InvalidArgument(
        "shared-memory group: invalid segment name '" + name +
        "' (it must be '/' followed by up to 200 characters without '/')");
  }
  if (options.chunk_bytes < 4096 || options.chunk_bytes % 4096 != 0 || options.ring_slots < 3 ||
      options.small_bytes > options.chunk_bytes || !(options.timeout_seconds > 0) ||
      !(options.poll_seconds > 0) || !(options.spin_seconds >= 0) ||
      !(options.yield_seconds >= 0)) {
    return Status::InvalidArgument(
        "shared-memory group: invalid options (chunk_bytes must be a positive multiple of 4096, "
        "ring_slots >= 3, small_bytes <= chunk_bytes, timeouts positive)");
  }
  // The layout multiplies per-rank sizes by the rank count: refuse sizes that would wrap
  // (a wrapped total maps a segment too small for the offsets computed from it).
  const size_t kMaxSegmentBytes = size_t(1) << 46;
  const size_t per_rank_limit = kMaxSegmentBytes / 2 / static_cast<size_t>(size);
  if (options.scratch_bytes > per_rank_limit ||
      options.chunk_bytes > per_rank_limit / static_cast<size_t>(options.ring_slots)) {
    return Status::InvalidArgument(
        "shared-memory group: a segment for " + std::to_string(size) + " ranks with " +
        std::to_string(options.scratch_bytes) + " scratch bytes each (TUTTI_SHM_BUFFER_BYTES) " +
        "would exceed 64 TiB");
  }
  const Layout layout(size, options.chunk_bytes, options.ring_slots, options.scratch_bytes);
  std::unique_ptr<Group> g(new Group());
  g->rank_ = rank;
  g->size_ = size;
  g->options_ = options;

  Status st;
  int fd = -1;
  auto map = [&](int fd) -> Status {
    void* p = mmap(nullptr, layout.total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) return Status::Internal(Errno("shared-memory group: mmap"));
    g->base_ = static_cast<char*>(p);
    g->mapped_bytes_ = layout.total;
    g->header_ = reinterpret_cast<Header*>(g->base_);
    return Status::OK();
  };
  if (rank == 0) {
    shm_unlink(name.c_str());  // a stale segment of a job that died before unlinking it
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
      st = Status::Internal(Errno(("shared-memory group: shm_open(" + name + ")").c_str()));
    } else if (int e = posix_fallocate(fd, 0, static_cast<off_t>(layout.total))) {
      st = Status::Internal("shared-memory group: cannot reserve " + std::to_string(layout.total) +
                            " bytes in /dev/shm: " + std::strerror(e));
    } else {
      st = map(fd);
      if (st.ok()) {
        Header* h = g->header_;
        h->segment_bytes = layout.total;
        h->chunk_bytes = options.chunk_bytes;
        h->scratch_bytes = options.scratch_bytes;
        h->single_copy_bytes = SingleCopyBytes(options);
        h->single_copy_mode = static_cast<int32_t>(options.single_copy);
        h->size = size;
        h->ring_slots = options.ring_slots;
        h->magic.store(kMagic, std::memory_order_release);
      }
    }
  }
  Status b = barrier();
  if (st.ok() && !b.ok()) st = b;
  if (rank != 0 && st.ok()) {
    fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
    struct stat info;
    if (fd < 0) {
      st = Status::Internal(Errno(
          ("shared-memory group: shm_open(" + name + ") on rank " + std::to_string(rank)).c_str()));
    } else if (fstat(fd, &info) != 0 || static_cast<size_t>(info.st_size) != layout.total) {
      st = Status::InvalidArgument("shared-memory group: segment " + name +
                                   " has another size than this rank expects (group size or "
                                   "options differ between ranks)");
    } else {
      st = map(fd);
      const Header* h = g->header_;
      if (st.ok() &&
          (h->magic.load(std::memory_order_acquire) != kMagic || h->size != size ||
           h->chunk_bytes != options.chunk_bytes || h->ring_slots != options.ring_slots ||
           h->scratch_bytes != options.scratch_bytes ||
           h->single_copy_bytes != SingleCopyBytes(options) ||
           h->single_copy_mode != static_cast<int32_t>(options.single_copy))) {
        st = Status::InvalidArgument("shared-memory group: segment " + name +
                                     " was created with other parameters (group size or options "
                                     "differ between ranks)");
      }
    }
  }
  if (st.ok()) {
    g->counters_off_ = layout.counters;
    g->sleepers_off_ = layout.sleepers;
    g->tiny_off_ = layout.tiny;
    g->slots_off_ = layout.slots;
    g->slot_stride_ = layout.slot_stride;
    g->slot_counts_off_ = layout.slot_counts;
    g->slot_data_off_ = layout.slot_data;
    g->rank_slots_bytes_ = layout.rank_slots_bytes;
    g->scratch_off_ = layout.scratch;
    g->scratch_stride_ = layout.scratch_stride;
    g->peers_ = reinterpret_cast<PeerLine*>(g->base_ + layout.peers);
    g->peers_[rank].id = SelfProcessId();
    g->probe_word_ = kMagic + static_cast<uint64_t>(rank);
    g->peers_[rank].probe_address = reinterpret_cast<uintptr_t>(&g->probe_word_);
    g->peers_[rank].waiting_cpu.store(-1, std::memory_order_relaxed);
    if (options.single_copy != Options::SingleCopy::kNever && size > 1) AllowPeerReads();
    g->header_->attached.fetch_add(1, std::memory_order_acq_rel);
  }
  Status b2 = barrier();
  if (rank == 0) shm_unlink(name.c_str());  // everyone has mapped it (or failed): unlink now
  if (fd >= 0) close(fd);
  if (st.ok() && !b2.ok()) st = b2;
  if (st.ok()) {
    const int attached = g->header_->attached.load(std::memory_order_acquire);
    if (attached != size) {
      st = Status::Aborted("shared-memory group: only " + std::to_string(attached) + " of " +
                           std::to_string(size) + " ranks could attach segment " + name);
    }
  }
  // Every rank calls the barrier a third time, whatever happened, so none waits in vain.
  Status probed = st.ok() ? g->ProbeSingleCopy(barrier) : barrier();
  if (st.ok()) st = probed;
  if (!st.ok()) return st;

  const bool yield = options.waiting == Waiting::kYield ||
                     (options.waiting == Waiting::kAuto && size > UsableCpus());
  g->yield_ = yield;
  g->spin_ns_ = static_cast<int64_t>(options.spin_seconds * 1e9);
  g->yield_ns_ = static_cast<int64_t>(options.yield_seconds * 1e9);
  g->poll_ns_ = std::max<int64_t>(1000000, static_cast<int64_t>(options.poll_seconds * 1e9));
  g->timeout_ns_ = static_cast<int64_t>(options.timeout_seconds * 1e9);
  g->slot_free_.assign(static_cast<size_t>(options.ring_slots), 0);
  g->seen_.assign(static_cast<size_t>(size), 0);
  *out = std::move(g);
  return Status::OK();
}

Group::~Group() {
  if (base_ != nullptr) munmap(base_, mapped_bytes_);
}

// ---- shared-memory accessors ----

void* Group::ScratchBuffer(size_t bytes) const {
  if (options_.scratch_bytes == 0 || bytes > options_.scratch_bytes) return nullptr;
  return Scratch(rank_);
}

int Group::NextSlot() {
  slot_pos_ = (slot_pos_ + 1) % options_.ring_slots;
  return slot_pos_;
}

// ---- waiting and failures ----

void Group::Post(std::atomic<uint32_t>* word, uint32_t value) {
  // The sequentially consistent store and load pair with the waiter's increment of the
  // sleepers count and its re-check: either the waiter sees the value, or we see the sleeper.
  word->store(value, std::memory_order_seq_cst);
  if (Sleepers(rank_)->load(std::memory_order_seq_cst) != 0) FutexWake(word);
}

Status Group::WaitFor(int peer, std::atomic<uint32_t>* word, uint32_t target, bool exact) {
  auto done = [&](uint32_t v) { return exact ? v == target : Reached(v, target); };
  if (done(word->load(std::memory_order_acquire))) return Status::OK();
  // Most waits end within a few hundred nanoseconds: poll without pausing first (a pause
  // costs ~50 ns on current x86 cores), unless ranks outnumber CPUs.
  if (!yield_) {
    for (int i = 0; i < 256; ++i) {
      if (done(word->load(std::memory_order_acquire))) return Status::OK();
    }
  }
  const int64_t start = NowNs();
  // Spin (pause) first unless ranks outnumber CPUs or the spins were useless lately (the
  // peer shares this CPU, see spin_advisor.h), then yield: a peer that has been preempted
  // by another process gets the core back sooner than through a futex wake. A patient wait
  // does neither (and leaves the advisor's count of waits alone).
  const bool spin = !yield_ && !patient_ && spin_advisor_.ShouldSpin();
  const int64_t spin_end = spin ? start + spin_ns_ : start;
  const int64_t yield_end = start + spin_ns_ + yield_ns_;
  int yields = 0;
  for (bool spinning = spin; !patient_;) {
    for (int i = 0; i < (spinning ? 64 : 2); ++i) {
      if (spinning) {
        CpuRelax();
      } else {
        // Where this thread waits, for a peer that suspects it shares this CPU.
        if (yields == 0) peers_[rank_].waiting_cpu.store(CurrentCpu(), std::memory_order_relaxed);
        sched_yield();
        ++yields;
      }
      if (done(word->load(std::memory_order_acquire))) {
        if (spin) {
          const SpinAdvisor::Outcome outcome =
              yields == 0                          ? SpinAdvisor::Outcome::kDuringSpin
              : yields <= SpinAdvisor::kFirstYields ? SpinAdvisor::Outcome::kAtFirstYields
                                                    : SpinAdvisor::Outcome::kLater;
          spin_advisor_.Record(outcome);
          // Only once the advisor is convinced (useless spins in a row): a single one happens
          // whenever the CPUs are merely busy, and moving would not help then.
          if (outcome == SpinAdvisor::Outcome::kAtFirstYields && spin_advisor_.skipping()) {
            MoveOffPeersCpu(peer);
          }
        }
        return Status::OK();
      }
    }
    if (header_->abort_word.load(std::memory_order_acquire) != 0) return FailFromShared();
    const int64_t now = NowNs();
    if (now >= yield_end) break;
    spinning = now < spin_end;
  }
  const int64_t deadline = start + timeout_ns_;
  int64_t next_check = NowNs() + poll_ns_;
  std::atomic<uint32_t>* sleepers = Sleepers(peer);
  for (;;) {
    sleepers->fetch_add(1, std::memory_order_seq_cst);
    const uint32_t v = word->load(std::memory_order_seq_cst);
    if (!done(v) && header_->abort_word.load(std::memory_order_seq_cst) == 0) {
      FutexWait(word, v, std::min(next_check, deadline) - NowNs());
    }
    sleepers->fetch_sub(1, std::memory_order_seq_cst);
    if (done(word->load(std::memory_order_acquire))) return Status::OK();
    if (header_->abort_word.load(std::memory_order_acquire) != 0) return FailFromShared();
    const int64_t now = NowNs();
    if (now >= next_check) {
      Status peers = CheckPeers();
      // A peer that failed raised its reason before it exited: report that reason.
      if (!peers.ok() && header_->abort_word.load(std::memory_order_acquire) != 0) {
        return FailFromShared();
      }
      if (!peers.ok()) return Fail(peers);
      next_check = now + poll_ns_;
    }
    if (now >= deadline) {
      return Fail(Status::Aborted(
          "shared-memory group: rank " + std::to_string(rank_) + " waited " +
          std::to_string(options_.timeout_seconds) + " s for rank " + std::to_string(peer) +
          " (pid " + std::to_string(peers_[peer].id.pid) +
          "), which is alive but not taking part (stopped, or calling other collectives)"));
    }
  }
}

void Group::MoveOffPeersCpu(int peer) {
  // One rank of the pair moves (two that both moved would meet again on the other CPU), and
  // not often: where CPUs are genuinely short, moving cannot help and must not churn.
  if (!options_.move_off_shared_cpu || rank_ < peer) return;
  const int cpu = CurrentCpu();
  if (cpu < 0 || peers_[peer].waiting_cpu.load(std::memory_order_relaxed) != cpu) return;
  const int64_t now = NowNs();
  if (cpu_moves_ > 0 && now - last_cpu_move_ns_ < kCpuMoveIntervalNs) return;
  last_cpu_move_ns_ = now;
  if (MoveOffCpu(cpu)) {
    ++cpu_moves_;
    spin_advisor_.Reset();  // apart, spinning pays again
  }
}

Status Group::WaitAll(uint32_t target) {
  for (int j = 0; j < size_; ++j) {
    // A counter seen at or past the target before needs no new look at the peer's line.
    if (j == rank_ || Reached(seen_[static_cast<size_t>(j)], target)) continue;
    SHM_RETURN_IF_ERROR(WaitFor(j, Counter(j), target, false));
    seen_[static_cast<size_t>(j)] = target;
  }
  return Status::OK();
}

Status Group::WaitRoundStart(int pos) { return WaitAll(slot_free_[static_cast<size_t>(pos)]); }

Status Group::CheckPeers() {
  for (int j = 0; j < size_; ++j) {
    if (j == rank_) continue;
    if (ProcessGone(peers_[j].id)) {
      return Status::Aborted("shared-memory group: rank " + std::to_string(j) + " (pid " +
                             std::to_string(peers_[j].id.pid) + ") exited or was killed");
    }
  }
  return Status::OK();
}

Status Group::CheckDescs(int pos, const SlotDesc& mine, const char* what) {
  for (int j = 0; j < size_; ++j) {
    if (j == rank_) continue;
    const SlotDesc& d = *Desc(j, pos);
    if (d.kind != mine.kind || d.aux != mine.aux || d.total_bytes != mine.total_bytes) {
      return Fail(Status::InvalidArgument(
          "shared-memory group: mismatched collectives: rank " + std::to_string(rank_) +
          " called " + what + " (" + KindName(mine.kind) + ", " + std::to_string(mine.total_bytes) +
          " bytes, parameter " + std::to_string(mine.aux) + ") while rank " + std::to_string(j) +
          " called " + KindName(d.kind) + " (" + std::to_string(d.total_bytes) +
          " bytes, parameter " + std::to_string(d.aux) + ")"));
    }
  }
  return Status::OK();
}

Status Group::status() const {
  if (!failed_.load(std::memory_order_acquire)) return Status::OK();
  std::lock_guard<std::mutex> lock(error_mu_);
  return error_;
}

Status Group::Fail(Status status) {
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!failed_.load(std::memory_order_relaxed)) {
      error_ = status;
      failed_.store(true, std::memory_order_release);
    }
  }
  RaiseShared(status.message());
  return this->status();
}

Status Group::FailFromShared() {
  // The raiser writes the message between storing 1 and 2; it takes microseconds.
  const int64_t give_up = NowNs() + 100000000;
  while (header_->abort_word.load(std::memory_order_acquire) != 2 && NowNs() < give_up) {
    sched_yield();
  }
  std::string message(header_->abort_message,
                      strnlen(header_->abort_message, sizeof(header_->abort_message)));
  std::lock_guard<std::mutex> lock(error_mu_);
  if (!failed_.load(std::memory_order_relaxed)) {
    error_ = Status::Aborted("shared-memory collective failed on rank " +
                             std::to_string(header_->abort_rank) + ": " + message);
    failed_.store(true, std::memory_order_release);
  }
  return error_;
}

void Group::RaiseShared(const std::string& message) {
  uint32_t expected = 0;
  if (header_->abort_word.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    const size_t n = std::min(message.size(), sizeof(header_->abort_message) - 1);
    std::memcpy(header_->abort_message, message.data(), n);
    header_->abort_message[n] = '\0';
    header_->abort_rank = rank_;
    header_->abort_word.store(2, std::memory_order_release);
  }
  for (int r = 0; r < size_; ++r) {
    FutexWake(Counter(r));
    for (int parity = 0; parity < 2; ++parity) {
      for (size_t line = 0; line < kTinyLines; ++line) FutexWake(&Tiny(r, parity, line)->seq);
    }
  }
}

void Group::Abort(const std::string& why) {
  Fail(
      Status::Aborted("shared-memory group aborted by rank " + std::to_string(rank_) + ": " + why));
}

}  // namespace shm
}  // namespace tutti
