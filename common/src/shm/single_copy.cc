// Single-copy collectives of tutti::shm::Group: large allreduces, broadcasts and allgathers
// move data straight between the ranks' buffers with one kernel copy (process_vm_readv,
// process_vm_writev) instead of passing every chunk through the segment. The protocols are
// described in docs/architecture.md ("Same-host shared memory", single copy); the choice
// between them and the pipeline in algorithm_choice.h.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kernels/reduce_kernels.h"
#include "shm/group.h"
#include "shm/internal.h"
#include "shm/layout.h"
#include "shm/platform.h"

namespace tutti {
namespace shm {

using internal::ForPieces;
using internal::kPlanBits;
using internal::kPlanSingleCopy;
using internal::kPlanStreaming;
using internal::kTableFits;
using internal::Overlap;

namespace {

constexpr int kIovecsPerCall = 512;  // below IOV_MAX (1024) on both sides

}  // namespace

Status Group::ProbeSingleCopy(const std::function<Status()>& barrier) {
  // Read every peer's probe word, then write it back unchanged (broadcasts write too).
  bool can_read = options_.single_copy != Options::SingleCopy::kNever && size_ > 1;
  for (int j = 0; can_read && j < size_; ++j) {
    if (j == rank_) continue;
    uint64_t word = 0;
    iovec local{&word, sizeof(word)};
    iovec remote{internal::Address(peers_[j].probe_address), sizeof(word)};
    can_read = ReadPeerMemory(peers_[j].id.pid, &local, 1, &remote, 1) ==
                   static_cast<int64_t>(sizeof(word)) &&
               word == kMagic + static_cast<uint64_t>(j);
    can_read = can_read && WritePeerMemory(peers_[j].id.pid, &local, 1, &remote, 1) ==
                               static_cast<int64_t>(sizeof(word));
  }
  peers_[rank_].can_read_peers.store(can_read ? 1 : 2, std::memory_order_release);
  Status b = barrier();
  if (!b.ok()) return b;
  bool everyone = size_ > 1;
  for (int j = 0; j < size_; ++j) {
    everyone = everyone && peers_[j].can_read_peers.load(std::memory_order_acquire) == 1;
  }
  single_copy_available_ = everyone;
  broadcast_choice_ = SharedAlgorithmChoice(1, size_, options_.chunk_bytes);
  allgather_choice_ = SharedAlgorithmChoice(2, size_, options_.chunk_bytes);
  peer_spans_.resize(static_cast<size_t>(size_));
  peer_starts_.resize(static_cast<size_t>(size_));
  return Status::OK();
}

Status Group::PeerCopyFailed(int j, const char* what, int64_t result) {
  // A peer that failed first raised its reason before it returned and perhaps exited; that
  // reason (say, which rank was killed) is the one to report, not the copy it broke.
  if (header_->abort_word.load(std::memory_order_acquire) != 0) return FailFromShared();
  const int e = result < 0 ? static_cast<int>(-result) : EFAULT;
  return Fail(Status::Aborted(
      "shared-memory group: rank " + std::to_string(rank_) + " could not " + what +
      " the buffer of rank " + std::to_string(j) + " (pid " + std::to_string(peers_[j].id.pid) +
      "): " + (e == ESRCH ? std::string("the process exited") : std::string(std::strerror(e)))));
}

Status Group::WritePeer(int j, const char* from, uint64_t to, int64_t bytes) {
  for (int64_t done = 0; done < bytes;) {
    iovec local{const_cast<char*>(from) + done, static_cast<size_t>(bytes - done)};
    iovec remote{internal::Address(to + static_cast<uint64_t>(done)), local.iov_len};
    const int64_t got = WritePeerMemory(peers_[j].id.pid, &local, 1, &remote, 1);
    if (got <= 0) return PeerCopyFailed(j, "write into", got);
    done += got;
  }
  return Status::OK();
}

Status Group::ReadPeer(int j, bool outputs, int64_t lo, int64_t n, size_t es,
                       const std::vector<std::pair<char*, size_t>>& local) {
  std::vector<iovec> remote;
  ForPieces(peer_spans_[j], peer_starts_[j], es, lo, n,
            [&](int64_t, const char* in, char* out, int64_t m) {
              remote.push_back({outputs ? out : const_cast<char*>(in), static_cast<size_t>(m) * es});
            });
  // Walk both lists, cutting them into pieces of equal length, a batch per system call; a
  // short read (possible at any piece boundary) continues where it stopped.
  size_t li = 0, loff = 0, ri = 0, roff = 0;
  std::vector<iovec> lv, rv;
  while (li < local.size() && ri < remote.size()) {
    lv.clear();
    rv.clear();
    for (size_t a = li, ao = loff, b = ri, bo = roff;
         a < local.size() && b < remote.size() && lv.size() < kIovecsPerCall;) {
      const size_t len = std::min(local[a].second - ao, remote[b].iov_len - bo);
      lv.push_back({local[a].first + ao, len});
      rv.push_back({static_cast<char*>(remote[b].iov_base) + bo, len});
      if ((ao += len) == local[a].second) ++a, ao = 0;
      if ((bo += len) == remote[b].iov_len) ++b, bo = 0;
    }
    const int64_t got = ReadPeerMemory(peers_[j].id.pid, lv.data(), static_cast<int>(lv.size()),
                                       rv.data(), static_cast<int>(rv.size()));
    if (got <= 0) return PeerCopyFailed(j, "read", got);
    for (int64_t left = got; left > 0;) {  // advance both cursors by what was read
      const size_t step = static_cast<size_t>(
          std::min<int64_t>(left, static_cast<int64_t>(
                                      std::min(local[li].second - loff, remote[ri].iov_len - roff))));
      left -= static_cast<int64_t>(step);
      if ((loff += step) == local[li].second) ++li, loff = 0;
      if ((roff += step) == remote[ri].iov_len) ++ri, roff = 0;
    }
  }
  return Status::OK();
}

// Which algorithm a large allreduce or allgather takes is known to every rank before the call
// starts, so that the pipeline needs no extra synchronisation: each call's descriptor from
// rank 0 carries its plan for the next call of the same kind and size class (kPlan* bits),
// which every rank reads during the call.
Group::Offer Group::AllreduceOffer(size_t bytes, bool small) {
  Offer offer;
  const bool single = !small && MaySingleCopy(bytes);
  if (single && options_.single_copy == Options::SingleCopy::kAlways) {
    offer.plans[offer.count++] = kPlanSingleCopy;
    return offer;
  }
  // The key of the choice: bit 0 cached stores, 1 streaming stores, 2 single copy, 3 the
  // small protocol (the others: the pipeline).
  unsigned set = small ? 8u : 0u;
  if (options_.slot_stores != Options::SlotStores::kStreaming) {
    offer.plans[offer.count++] = 0;
    set |= 1;
  }
  if (options_.slot_stores != Options::SlotStores::kCached) {
    offer.plans[offer.count++] = kPlanStreaming;
    set |= 2;
  }
  if (single) {
    offer.plans[offer.count++] = kPlanSingleCopy;
    set |= 4;
  }
  if (offer.count > 1) {
    if (allreduce_choices_[set] == nullptr) {
      allreduce_choices_[set] = SharedAlgorithmChoice(8 + static_cast<int>(set), size_,
                                                      options_.chunk_bytes);
    }
    offer.choice = allreduce_choices_[set];
  }
  offer.set = static_cast<int>(set);
  return offer;
}

Group::PlannedCall Group::PlanCall(size_t bytes, const Offer& offer, const uint32_t* planned,
                                   SlotDesc* desc) {
  PlannedCall call;
  call.size_class = AlgorithmChoice::ClassOf(bytes);
  call.measure = rank_ == 0 && offer.choice != nullptr;
  // Rank 0's plan from the last call of this class, if it is on offer (every rank changes
  // the options between the same calls, so all agree), else the first on offer.
  call.plan = offer.plans[0];
  for (int i = 0; i < offer.count; ++i) {
    if (offer.plans[i] == planned[call.size_class]) call.plan = planned[call.size_class];
  }
  desc->plan_flags =
      call.measure ? offer.plans[offer.choice->Next(bytes, offer.count)] : call.plan;
  timing_call_ = call.measure;
  if (call.measure) call_arrived_ns_ = NowNs();
  return call;
}

uint32_t Group::AllArrived(int pos, bool restart_clock) {
  if (timing_call_ && restart_clock) {
    call_arrived_ns_ = NowNs();
    timing_call_ = false;
  }
  return Desc(0, pos)->plan_flags;
}

void Group::FinishPlannedCall(const PlannedCall& call, size_t bytes, const Offer& offer,
                              uint32_t* planned, uint32_t took, uint32_t rank0_flags) {
  // A call with nothing to choose carries no plan; the next call with a choice follows the
  // plan of the last call that had one.
  if (offer.count > 1) planned[call.size_class] = rank0_flags & kPlanBits;
  for (int i = 0; call.measure && i < offer.count; ++i) {
    if (offer.plans[i] == took) offer.choice->Record(bytes, i, NowNs() - call_arrived_ns_);
  }
  timing_call_ = false;
}

void Group::SetPeerTable(int j, const PeerSpan* table, size_t spans) {
  peer_spans_[j].assign(table, table + spans);
  peer_starts_[j].resize(spans);
  int64_t at = 0;
  for (size_t i = 0; i < spans; ++i) {
    peer_starts_[j][i] = at;
    at += peer_spans_[j][i].count;
  }
}

// A single copy starts by exchanging buffer tables; if one does not fit its slot
// (kTableFits clear), that call takes the pipeline after all.
Status Group::AllreduceLarge(const std::vector<Span>& spans, int64_t count, size_t es,
                             tutti_dtype dtype, tutti_reduce_op op, const SlotDesc& desc,
                             int64_t want_begin, int64_t want_end, double factor, int divisor) {
  const size_t bytes = static_cast<size_t>(count) * es;
  // Nothing to choose: the cached pipeline.
  if (!MaySingleCopy(bytes) && options_.slot_stores == Options::SlotStores::kCached) {
    return AllreducePipelined(spans, count, es, dtype, op, desc, want_begin, want_end, factor,
                              divisor, false, nullptr);
  }
  SlotDesc mine = desc;
  const Offer offer = AllreduceOffer(bytes, false);
  const PlannedCall call = PlanCall(bytes, offer, planned_allreduce_[offer.set], &mine);
  bool single = call.plan == kPlanSingleCopy;
  uint32_t rank0_flags = 0;
  if (single) {
    const int pos = NextSlot();
    SHM_RETURN_IF_ERROR(WaitRoundStart(pos));
    const bool fits = spans.size() <= options_.chunk_bytes / sizeof(PeerSpan);
    mine.plan_flags |= fits ? kTableFits : 0u;
    mine.span_count = fits ? static_cast<uint32_t>(spans.size()) : 0;
    if (fits) {
      PeerSpan* table = reinterpret_cast<PeerSpan*>(SlotData(rank_, pos));
      for (size_t i = 0; i < spans.size(); ++i) {
        table[i] = {reinterpret_cast<uintptr_t>(spans[i].in),
                    reinterpret_cast<uintptr_t>(spans[i].out), spans[i].count};
      }
    }
    *Desc(rank_, pos) = mine;
    const uint32_t ready = NextPhase();
    Post(Counter(rank_), ready);
    SHM_RETURN_IF_ERROR(WaitAll(ready));
    SHM_RETURN_IF_ERROR(CheckDescs(pos, mine, "allreduce"));
    rank0_flags = AllArrived(pos);
    for (int j = 0; j < size_; ++j) {
      single = single && (Desc(j, pos)->plan_flags & kTableFits) != 0;
    }
    for (int j = 0; single && j < size_; ++j) {
      if (j == rank_) continue;
      SetPeerTable(j, reinterpret_cast<const PeerSpan*>(SlotData(j, pos)), Desc(j, pos)->span_count);
    }
    // Every rank posts a later phase only after reading the tables above.
    slot_free_[static_cast<size_t>(pos)] = phase_ + 1;
  }
  const bool streaming = call.plan == kPlanStreaming;
  Status s = single ? AllreduceSingleCopy(spans, count, es, dtype, op, want_begin, want_end,
                                          factor, divisor)
                    : AllreducePipelined(spans, count, es, dtype, op, mine, want_begin, want_end,
                                         factor, divisor, streaming,
                                         call.plan == kPlanSingleCopy ? nullptr : &rank0_flags);
  if (!s.ok()) return s;
  if (single) ++single_copy_calls_;
  if (streaming) ++streaming_calls_;
  // A planned single copy whose tables did not fit ran the cached pipeline.
  FinishPlannedCall(call, bytes, offer, planned_allreduce_[offer.set],
                    single ? kPlanSingleCopy : streaming ? kPlanStreaming : 0u, rank0_flags);
  return s;
}

// Rank r reduces slice r of the vector: a chunk at a time, it reads each peer's inputs of the
// chunk into local memory (the one copy) and reduces them in rank order into its outputs.
// Once every rank has posted that, each reads the others' finished slices straight into its
// outputs. A last synchronisation keeps every rank's buffers in place until nobody reads them.
Status Group::AllreduceSingleCopy(const std::vector<Span>& spans, int64_t count, size_t es,
                                  tutti_dtype dtype, tutti_reduce_op op, int64_t want_begin,
                                  int64_t want_end, double factor, int divisor) {
  std::vector<int64_t> starts(spans.size());
  for (size_t i = 0, at = 0; i < spans.size(); at += spans[i].count, ++i) starts[i] = at;
  const int64_t chunk = static_cast<int64_t>(options_.chunk_bytes / es);
  const int64_t b = count * rank_ / size_, e = count * (rank_ + 1) / size_;
  // As in the pipeline: rank 0, and the second of two ranks for ops that commute bit for bit,
  // accumulate in their outputs starting from their own values.
  const bool own_first = rank_ == 0 || (size_ == 2 && (op == TUTTI_REDUCE_SUM ||
                                                       op == TUTTI_REDUCE_PRODUCT));
  incoming_.resize(options_.chunk_bytes);
  if (!own_first) partial_.resize(options_.chunk_bytes);
  char* incoming = incoming_.data();
  for (int64_t lo = b; lo < e; lo += chunk) {
    const int64_t m = std::min(chunk, e - lo);
    const size_t len = static_cast<size_t>(m) * es;
    if (own_first) {
      ForPieces(spans, starts, es, lo, m, [&](int64_t, const char* in, char* out, int64_t pm) {
        if (out != in) std::memcpy(out, in, static_cast<size_t>(pm) * es);
      });
      for (int j = 0; j < size_; ++j) {
        if (j == rank_) continue;
        SHM_RETURN_IF_ERROR(ReadPeer(j, false, lo, m, es, {{incoming, len}}));
        ForPieces(spans, starts, es, lo, m, [&](int64_t at, const char*, char* out, int64_t pm) {
          ReduceInto(dtype, op, out, incoming + static_cast<size_t>(at) * es,
                     static_cast<size_t>(pm));
        });
      }
      ForPieces(spans, starts, es, lo, m, [&](int64_t, const char*, char* out, int64_t pm) {
        ScaleInPlace(dtype, out, static_cast<size_t>(pm), factor, divisor);
      });
    } else {
      char* acc = partial_.data();
      SHM_RETURN_IF_ERROR(ReadPeer(0, false, lo, m, es, {{acc, len}}));
      for (int j = 1; j < size_; ++j) {
        if (j == rank_) {
          ForPieces(spans, starts, es, lo, m, [&](int64_t at, const char* in, char*, int64_t pm) {
            ReduceInto(dtype, op, acc + static_cast<size_t>(at) * es, in, static_cast<size_t>(pm));
          });
          continue;
        }
        SHM_RETURN_IF_ERROR(ReadPeer(j, false, lo, m, es, {{incoming, len}}));
        ReduceInto(dtype, op, acc, incoming, static_cast<size_t>(m));
      }
      ScaleInPlace(dtype, acc, static_cast<size_t>(m), factor, divisor);
      ForPieces(spans, starts, es, lo, m, [&](int64_t at, const char*, char* out, int64_t pm) {
        std::memcpy(out, acc + static_cast<size_t>(at) * es, static_cast<size_t>(pm) * es);
      });
    }
  }
  const uint32_t reduced = NextPhase();
  Post(Counter(rank_), reduced);
  SHM_RETURN_IF_ERROR(WaitAll(reduced));
  std::vector<std::pair<char*, size_t>> local;
  for (int j = 0; j < size_; ++j) {
    if (j == rank_) continue;
    int64_t start;
    const int64_t n = Overlap(want_begin, want_end, count * j / size_,
                              count * (j + 1) / size_ - count * j / size_, &start);
    if (n <= 0) continue;
    local.clear();
    ForPieces(spans, starts, es, start, n, [&](int64_t, const char*, char* out, int64_t pm) {
      local.push_back({out, static_cast<size_t>(pm) * es});
    });
    SHM_RETURN_IF_ERROR(ReadPeer(j, true, start, n, es, local));
  }
  const uint32_t done = NextPhase();
  Post(Counter(rank_), done);
  return WaitAll(done);
}

// The root's buffer reaches every other rank with one kernel copy, and both ends share the
// work: each receiver reads the first (size-1)/size of it from the root while the root writes
// the last 1/size into each receiver. One core copies through the kernel at 4-5 GB/s on the
// VMs measured; two copying at once reach 7-8 GB/s. The receivers publish their buffer's
// address at `written`; the root posts `done` once its writes are complete and returns once
// every receiver has posted `done` (it has stopped reading).
Status Group::BroadcastSingleCopy(char* buffer, int64_t bytes, int root, const SlotDesc& desc,
                                  int pos, uint32_t written, uint32_t done) {
  const int64_t pushed = bytes / size_;
  const int64_t pulled = bytes - pushed;
  const PeerSpan mine = {reinterpret_cast<uintptr_t>(buffer), reinterpret_cast<uintptr_t>(buffer),
                         bytes};
  SHM_RETURN_IF_ERROR(WaitRoundStart(pos));
  *reinterpret_cast<PeerSpan*>(SlotData(rank_, pos)) = mine;
  if (rank_ == root) {
    *Desc(rank_, pos) = desc;
    Post(Counter(rank_), written);
    SHM_RETURN_IF_ERROR(WaitAll(written));
    for (int j = 0; j < size_ && pushed > 0; ++j) {
      if (j == rank_) continue;
      const PeerSpan theirs = *reinterpret_cast<const PeerSpan*>(SlotData(j, pos));
      SHM_RETURN_IF_ERROR(
          WritePeer(j, buffer + pulled, theirs.out + static_cast<uint64_t>(pulled), pushed));
    }
    Post(Counter(rank_), done);
    SHM_RETURN_IF_ERROR(WaitAll(done));
  } else {
    Post(Counter(rank_), written);
    SetPeerTable(root, reinterpret_cast<const PeerSpan*>(SlotData(root, pos)), 1);
    SHM_RETURN_IF_ERROR(ReadPeer(root, false, 0, pulled, 1, {{buffer, static_cast<size_t>(pulled)}}));
    SHM_RETURN_IF_ERROR(WaitFor(root, Counter(root), done, false));  // its writes have landed
    Post(Counter(rank_), done);
  }
  slot_free_[static_cast<size_t>(pos)] = done;
  ++single_copy_calls_;
  return Status::OK();
}

// Every rank publishes where its part lies in its output (the part is there already) and
// reads every other rank's part from there straight into its own output: all ranks copy at
// once, each byte once.
Status Group::AllgatherSingleCopy(char* output, const std::vector<int64_t>& bytes,
                                  const std::vector<int64_t>& offset, const SlotDesc& desc,
                                  uint32_t* rank0_flags) {
  const int pos = NextSlot();
  SHM_RETURN_IF_ERROR(WaitRoundStart(pos));
  const uint32_t written = NextPhase(), done = NextPhase();
  *Desc(rank_, pos) = desc;
  char* mine = output + offset[rank_];
  *reinterpret_cast<PeerSpan*>(SlotData(rank_, pos)) = {
      reinterpret_cast<uintptr_t>(mine), reinterpret_cast<uintptr_t>(mine), bytes[rank_]};
  Post(Counter(rank_), written);
  SHM_RETURN_IF_ERROR(WaitAll(written));
  SHM_RETURN_IF_ERROR(CheckAllgatherDescs(pos, desc, bytes));
  *rank0_flags = AllArrived(pos);
  for (int j = 0; j < size_; ++j) {
    if (j == rank_ || bytes[j] == 0) continue;
    SetPeerTable(j, reinterpret_cast<const PeerSpan*>(SlotData(j, pos)), 1);
    SHM_RETURN_IF_ERROR(
        ReadPeer(j, false, 0, bytes[j], 1, {{output + offset[j], static_cast<size_t>(bytes[j])}}));
  }
  Post(Counter(rank_), done);
  SHM_RETURN_IF_ERROR(WaitAll(done));
  slot_free_[static_cast<size_t>(pos)] = done;
  ++single_copy_calls_;
  return Status::OK();
}

}  // namespace shm
}  // namespace tutti
