// tutti::shm::Group: collectives among processes of one host through one POSIX shared-memory
// segment. It offers the data-plane methods of Transport (transport.h) for the members of
// one process set that share a host; the design is described in docs/architecture.md
// ("Same-host shared memory").
//
// Usage: every member calls Group::Create with the same name, size and options, its rank
// within the group, and a barrier over the same processes (the caller's MPI or Gloo
// transport). All members then call the same collectives in the same order from one thread
// each. Any error (a peer that died or stopped answering, a mismatched call, Abort) makes the
// group unusable: that call and every later one return the error, on every member.
#ifndef TUTTI_SRC_SHM_GROUP_H_
#define TUTTI_SRC_SHM_GROUP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "shm/algorithm_choice.h"
#include "shm/layout.h"
#include "shm/spin_advisor.h"
#include "tutti/c_api.h"

namespace tutti {
namespace shm {

class Group {
 public:
  enum class Waiting {
    kAuto,   // kYield when the group has more ranks than this process has CPUs, else kSpin
    kSpin,   // spin with a pause instruction, then yield, then sleep
    kYield,  // yield, then sleep
  };

  struct Options {
    // Deadline of every single wait for a peer; past it the call fails (a stopped peer).
    double timeout_seconds = 60;
    // How often a waiting rank checks the abort word and its peers' liveness while asleep.
    double poll_seconds = 0.05;
    // A waiting rank spins this long (unless ranks outnumber CPUs), then calls sched_yield
    // for yield_seconds, then sleeps on a futex.
    double spin_seconds = 30e-6;
    double yield_seconds = 500e-6;
    Waiting waiting = Waiting::kAuto;
    // When waits show that its peer runs on this rank's CPU (the scheduler's wake-up
    // placement can leave two ranks taking turns on one CPU while another idles; every call
    // then costs two context switches), the higher rank of the two moves itself to another
    // CPU it may run on, at most every kCpuMoveIntervalNs. Its affinity mask is left as it was.
    bool move_off_shared_cpu = true;
    // Pipeline segment: large messages move in chunks of this size through a ring of
    // ring_slots (>= 3) slots per rank. Multiple of 4096.
    size_t chunk_bytes = 256 * 1024;
    int ring_slots = 4;
    // Allreduce of up to 1792 bytes travels in flagged cache lines; up to small_bytes it takes
    // one synchronisation (every rank reduces everything); larger ones are pipelined with the
    // reduction split across ranks. At most chunk_bytes.
    size_t small_bytes = 16 * 1024;
    // Per-rank memory in the segment that callers may use as their (fusion) buffer: an
    // allreduce whose buffer lies there skips the copy into the segment. 0: none.
    size_t scratch_bytes = 0;
    // Allreduces, broadcasts and allgathers of at least single_copy_bytes may instead move
    // their data straight between the ranks' buffers with one kernel copy (process_vm_readv,
    // process_vm_writev), when the kernel lets the ranks do so: kAuto picks the faster of
    // that and the pipeline from measured times (algorithm_choice.h), kAlways takes it
    // whenever it is possible, kNever never does.
    enum class SingleCopy { kAuto, kAlways, kNever };
    SingleCopy single_copy = SingleCopy::kAuto;
    size_t single_copy_bytes = 1 << 20;
    // How an allreduce past the tiny path (small or pipelined) writes its slots: with ordinary
    // stores, with streaming stores that bypass the cache (streaming_copy.h), or (kAuto)
    // whichever the measured choice finds faster, among the algorithms above.
    enum class SlotStores { kAuto, kCached, kStreaming };
    SlotStores slot_stores = SlotStores::kAuto;
  };

  // Bytes of the shared segment for a group of `size` ranks with these options.
  static size_t SegmentBytes(int size, const Options& options);

  // How many times Create calls its barrier on every rank: a process that takes part in the
  // barrier without creating a group (alone on its host) must call it as often.
  static constexpr int kCreateBarriers = 3;

  // Rank 0 creates the segment `name` ("/name", unique per job and process set; a stale
  // segment of that name is replaced), `barrier` is called kCreateBarriers times on every
  // rank (it must synchronise at least these processes), the others map it, and rank 0
  // unlinks the name once everyone has mapped it: nothing is left in /dev/shm after that,
  // whatever happens to the processes. Fails on every rank if any rank failed to attach.
  static Status Create(const std::string& name, int rank, int size, const Options& options,
                       const std::function<Status()>& barrier, std::unique_ptr<Group>* out);
  ~Group();

  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // ---- collectives; arguments as in Transport (transport.h), ranks within the group ----

  // In place. op is SUM, MIN, MAX or PRODUCT, reduced in rank order with the core's kernels,
  // so every rank gets bit-identical results.
  Status Allreduce(void* buffer, int64_t count, tutti_dtype dtype, tutti_reduce_op op);

  // One tensor of AllreduceSpans: `count` elements read from `in`, results written to `out`
  // (the same memory, or memory that overlaps no other span's).
  struct Span {
    const void* in;
    void* out;
    int64_t count;
  };
  // Allreduces the spans as one vector (their concatenation) without packing them first: the
  // pipeline copies each chunk from the spans into the segment and the results back out, so
  // the fusion copies overlap the reduction and run on cache-sized pieces. The results are
  // then scaled as ScaleInPlace(dtype, out, count, factor, divisor) would, chunk by chunk.
  Status AllreduceSpans(const std::vector<Span>& spans, tutti_dtype dtype, tutti_reduce_op op,
                        double factor, int divisor);
  Status Broadcast(void* buffer, int64_t bytes, int root);
  Status Allgatherv(const void* input, void* output, const std::vector<int64_t>& counts,
                    size_t element_size);
  // An allgather whose parts every rank knows to be `bytes` long on every rank (the cycle's
  // flag exchange): small parts travel in flagged cache lines, like a tiny allreduce. Only
  // for callers that guarantee equal parts: a general Allgatherv cannot choose this path,
  // since a rank whose counts differ would take the other one and the mismatch would go
  // unnoticed until the deadline.
  Status AllgatherEqual(const void* input, void* output, int64_t bytes);
  // While set, a wait for a peer sleeps on the futex at once instead of spinning and
  // yielding first: for exchanges that expect to wait long (a cycle opened before the other
  // ranks have anything to add), where polling would burn a CPU for nothing.
  void set_patient(bool patient) { patient_ = patient; }
  Status Alltoallv(const void* input, const std::vector<int64_t>& send_counts, void* output,
                   const std::vector<int64_t>& recv_counts, size_t element_size);
  // Reduces `buffer` (sum of counts elements; clobbered) and writes this rank's part to
  // output. set_rank must be this group rank.
  Status ReduceScatter(int set_rank, void* buffer, const std::vector<int64_t>& counts, void* output,
                       tutti_dtype dtype, tutti_reduce_op op);
  Status Barrier();

  // Fails the group on every rank: waits in progress on any rank return an error carrying
  // `why`, and so does every later call. Safe from any thread.
  void Abort(const std::string& why);

  // OK, or the error that made the group unusable.
  Status status() const;

  // Whether every rank may read every other's memory (tested at Create), so that large calls
  // can take a single copy; false with SingleCopy::kNever.
  bool single_copy_available() const { return single_copy_available_; }
  // Calls so far that took the single copy (this rank's count; every rank agrees).
  uint64_t single_copy_calls() const { return single_copy_calls_; }
  // Times this rank moved itself off a CPU that it shared with a peer (move_off_shared_cpu).
  uint64_t cpu_moves() const { return cpu_moves_; }
  // Changes Options::single_copy for the calls that follow: every rank must make the same
  // change between the same two calls (benchmarks compare the modes on one group with it).
  // Has no effect where single copies are unavailable.
  void set_single_copy(Options::SingleCopy mode) { options_.single_copy = mode; }
  // The same for Options::slot_stores.
  void set_slot_stores(Options::SlotStores mode) { options_.slot_stores = mode; }
  // Allreduces so far (small or pipelined) that wrote their slots with streaming stores.
  uint64_t streaming_calls() const { return streaming_calls_; }

  // This rank's scratch memory inside the segment (Options::scratch_bytes), or nullptr if
  // `bytes` exceeds it. Allreduce/ReduceScatter of more than chunk_bytes on a buffer that lies
  // in it (at the same offset on every rank) read the peers' data in place: each rank reduces
  // its slice from everyone's scratch and copies the others' results out; no chunking, no
  // copy in. Either all ranks pass scratch memory or none (a mismatch is an error).
  void* ScratchBuffer(size_t bytes) const;

 private:
  Group() = default;

  // Shared-memory accessors.
  std::atomic<uint32_t>* Counter(int r) const {
    return &reinterpret_cast<CounterLine*>(base_ + counters_off_)[r].value;
  }
  std::atomic<uint32_t>* Sleepers(int r) const {
    return &reinterpret_cast<SleepersLine*>(base_ + sleepers_off_)[r].count;
  }
  // A rank's lines: the first line of both blocks side by side (a one-line call then touches
  // one 128-byte pair, as the adjacent-line prefetcher fetches), then each block's other lines
  // contiguously.
  TinyLine* Tiny(int r, int parity, size_t line) const {
    TinyLine* lines = reinterpret_cast<TinyLine*>(base_ + tiny_off_) + r * kTinyStride;
    return line == 0 ? lines + parity : lines + 2 + parity * (kTinyLines - 1) + (line - 1);
  }
  char* Slot(int r, int pos) const {
    return base_ + slots_off_ + static_cast<size_t>(r) * rank_slots_bytes_ +
           static_cast<size_t>(pos) * slot_stride_;
  }
  SlotDesc* Desc(int r, int pos) const { return reinterpret_cast<SlotDesc*>(Slot(r, pos)); }
  int64_t* SlotCounts(int r, int pos) const {
    return reinterpret_cast<int64_t*>(Slot(r, pos) + slot_counts_off_);
  }
  char* SlotData(int r, int pos) const { return Slot(r, pos) + slot_data_off_; }
  char* Scratch(int r) const {
    return base_ + scratch_off_ + static_cast<size_t>(r) * scratch_stride_;
  }

  // Phases: every rank walks the same sequence; a rank stores a phase into its counter when
  // it has finished the step the phase stands for.
  uint32_t NextPhase() { return ++phase_; }
  int NextSlot();
  void Post(std::atomic<uint32_t>* word, uint32_t value);
  // Waits until *word (owned by `peer`) has reached `target` (wrap-safe; exactly == for tiny).
  Status WaitFor(int peer, std::atomic<uint32_t>* word, uint32_t target, bool exact);
  Status WaitAll(uint32_t target);
  Status WaitRoundStart(int pos);
  Status CheckDescs(int pos, const SlotDesc& mine, const char* what);
  // Called when this rank's waits for `peer` suggest that both run on one CPU.
  void MoveOffPeersCpu(int peer);
  Status CheckPeers();

  Status Fail(Status status);  // records the error and raises the shared abort word
  Status FailFromShared();     // the abort word is raised: adopt its message
  void RaiseShared(const std::string& message);

  // Allreduce, barrier, or (with `gathered`) an allgather of equal parts into `gathered`.
  Status TinyCall(uint32_t kind, void* buffer, int64_t count, size_t element_size,
                  tutti_dtype dtype, tutti_reduce_op op, char* gathered = nullptr);
  Status AllreduceSmall(char* buffer, int64_t count, size_t es, tutti_dtype dtype,
                        tutti_reduce_op op, const SlotDesc& desc);
  Status AllreducePipelined(const std::vector<Span>& spans, int64_t count, size_t es,
                            tutti_dtype dtype, tutti_reduce_op op, const SlotDesc& desc,
                            int64_t want_begin, int64_t want_end, double factor, int divisor,
                            bool streaming, uint32_t* rank0_flags);
  Status AllreduceDirect(char* buffer, int64_t count, size_t es, tutti_dtype dtype,
                         tutti_reduce_op op, const SlotDesc& call, int64_t want_begin,
                         int64_t want_end);
  Status AllreduceImpl(void* buffer, int64_t count, tutti_dtype dtype, tutti_reduce_op op,
                       int64_t want_begin, int64_t want_end);
  // Whether a call of `bytes` may take the single copy (the same on every rank).
  bool MaySingleCopy(size_t bytes) const {
    return single_copy_available_ && options_.single_copy != Options::SingleCopy::kNever &&
           bytes >= options_.single_copy_bytes;
  }
  // A peer's tensor in its buffer table: input and output address, elements.
  struct PeerSpan {
    uint64_t in, out;
    int64_t count;
  };
  // A large allreduce or allgather whose algorithm rank 0 plans one call ahead
  // (single_copy.cc): PlanCall before its first round, FinishPlannedCall once it is done.
  // The algorithms on offer, as the plan bits (internal::kPlan*) that name them, in the order
  // of the indices of `choice` (nullptr with one algorithm: nothing to choose).
  struct Offer {
    uint32_t plans[AlgorithmChoice::kMaxAlgorithms] = {};
    int count = 0;
    AlgorithmChoice* choice = nullptr;
    int set = 0;  // which set of algorithms (allreduce_choices_): the key of its choice and plans
  };
  struct PlannedCall {
    int size_class = 0;
    bool measure = false;  // rank 0 with a choice to make: plans the next call, times this one
    uint32_t plan = 0;     // this call's algorithm (kPlan* bits; 0: the cached pipeline)
  };
  // What an allreduce of `bytes` may take under the current options: the small protocol
  // (`small`) with either stores, or the pipeline with either stores or the single copy.
  Offer AllreduceOffer(size_t bytes, bool small);
  PlannedCall PlanCall(size_t bytes, const Offer& offer, const uint32_t* planned, SlotDesc* desc);
  void FinishPlannedCall(const PlannedCall& call, size_t bytes, const Offer& offer,
                         uint32_t* planned, uint32_t took, uint32_t rank0_flags);
  // Every rank has arrived at the current planned call (their descriptors are in slot `pos`):
  // rank 0 times the call from here (with restart_clock), so that a peer's late arrival is
  // not counted against the algorithm that happened to run; returns rank 0's plan flags.
  uint32_t AllArrived(int pos, bool restart_clock = true);
  // Rank j's buffer table for the current call (its spans and their first elements).
  void SetPeerTable(int j, const PeerSpan* table, size_t spans);
  // A large allreduce: the ranks agree on the pipeline or the single copy (single_copy.cc).
  Status AllreduceLarge(const std::vector<Span>& spans, int64_t count, size_t es,
                        tutti_dtype dtype, tutti_reduce_op op, const SlotDesc& desc,
                        int64_t want_begin, int64_t want_end, double factor, int divisor);
  Status AllreduceSingleCopy(const std::vector<Span>& spans, int64_t count, size_t es,
                             tutti_dtype dtype, tutti_reduce_op op, int64_t want_begin,
                             int64_t want_end, double factor, int divisor);
  // Copies elements [lo, lo + n) of rank j's inputs (or outputs) to `local`, a list of
  // (pointer, bytes) of n elements in all, with process_vm_readv.
  Status ReadPeer(int j, bool outputs, int64_t lo, int64_t n, size_t es,
                  const std::vector<std::pair<char*, size_t>>& local);
  // Writes `bytes` from `from` to address `to` of rank j (process_vm_writev).
  Status WritePeer(int j, const char* from, uint64_t to, int64_t bytes);
  Status PeerCopyFailed(int j, const char* what, int64_t result);
  // The first round of a broadcast that its root chose to take as a single copy.
  Status BroadcastSingleCopy(char* buffer, int64_t bytes, int root, const SlotDesc& desc, int pos,
                             uint32_t written, uint32_t done);
  Status AllgatherSingleCopy(char* output, const std::vector<int64_t>& bytes,
                             const std::vector<int64_t>& offset, const SlotDesc& desc,
                             uint32_t* rank0_flags);
  // The allgather descriptors of round `pos` match this call, parts included.
  Status CheckAllgatherDescs(int pos, const SlotDesc& desc, const std::vector<int64_t>& bytes);
  // Tests once, at Create, that every rank can read every other's memory; agreed by all.
  Status ProbeSingleCopy(const std::function<Status()>& barrier);

  int rank_ = 0;
  int size_ = 1;
  Options options_;
  char* base_ = nullptr;
  size_t mapped_bytes_ = 0;
  Header* header_ = nullptr;
  PeerLine* peers_ = nullptr;
  size_t counters_off_ = 0, sleepers_off_ = 0, tiny_off_ = 0, slots_off_ = 0;
  size_t slot_stride_ = 0, slot_counts_off_ = 0, slot_data_off_ = 0, rank_slots_bytes_ = 0;
  size_t scratch_off_ = 0, scratch_stride_ = 0;
  bool yield_ = false;
  SpinAdvisor spin_advisor_;  // whether this rank's waits spin first
  // Options::move_off_shared_cpu: when this rank last moved, how often it did.
  static constexpr int64_t kCpuMoveIntervalNs = 2000000;
  int64_t last_cpu_move_ns_ = 0;
  uint64_t cpu_moves_ = 0;
  bool patient_ = false;
  int64_t spin_ns_ = 0, yield_ns_ = 0, poll_ns_ = 0, timeout_ns_ = 0;

  uint32_t phase_ = 0;               // last phase handed out
  uint64_t tiny_count_ = 0;          // tiny calls so far
  int slot_pos_ = -1;                // ring position of the last round
  std::vector<uint32_t> slot_free_;  // per ring position: phase after which it may be reused
  std::vector<uint32_t> seen_;       // per peer: a phase its counter is known to have reached
  std::vector<char> gathered_;       // small AllreduceSpans calls, packed

  // Single copies: whether possible, the deciding rank's measurements (rank 0 for
  // allreduce, the root for broadcast), the peers' buffer tables of the current call, and
  // room for a chunk read from a peer and for a partial sum.
  bool single_copy_available_ = false;
  uint64_t single_copy_calls_ = 0;
  AlgorithmChoice* broadcast_choice_ = nullptr;
  AlgorithmChoice* allgather_choice_ = nullptr;
  bool timing_call_ = false;     // rank 0: the planned call's arrival is still to be noted
  int64_t call_arrived_ns_ = 0;  // when it was (or, until then, when the call started)
  // Per set of algorithms offered to an allreduce (AllreduceOffer), its choice; fetched on
  // first use.
  AlgorithmChoice* allreduce_choices_[16] = {};
  // Per set and size class: rank 0's plan for the next call. Each set keeps its own, so that
  // calls under other options in between (a forced algorithm) do not change what the next
  // call under these options takes.
  uint32_t planned_allreduce_[16][64] = {};
  uint32_t planned_allgather_[64] = {};  // and for the next allgather
  uint64_t streaming_calls_ = 0;
  std::vector<std::vector<PeerSpan>> peer_spans_;
  std::vector<std::vector<int64_t>> peer_starts_;
  std::vector<char> incoming_, partial_;
  uint64_t probe_word_ = 0;

  std::atomic<bool> failed_{false};
  mutable std::mutex error_mu_;
  Status error_;
};

}  // namespace shm
}  // namespace tutti

#endif  // TUTTI_SRC_SHM_GROUP_H_
