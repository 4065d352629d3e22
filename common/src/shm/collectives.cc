// The collectives of tutti::shm::Group (group.h); the protocols are described in
// docs/architecture.md ("Same-host shared memory").
#include <algorithm>
#include <cstring>

#include "base/dtype.h"
#include "kernels/reduce_kernels.h"
#include "shm/group.h"
#include "shm/internal.h"
#include "shm/layout.h"
#include "shm/platform.h"
#include "shm/streaming_copy.h"

namespace tutti {
namespace shm {

using internal::kAllgather;
using internal::kAllreduce;
using internal::kAllreduceScratch;
using internal::kAlltoall;
using internal::kBarrier;
using internal::kBroadcast;
using internal::KindName;
using internal::ForPieces;
using internal::kPlanSingleCopy;
using internal::kPlanStreaming;
using internal::Overlap;

// Every rank writes its data into its block of lines, each line with the call's sequence
// number, then reads every rank's lines. Reusing a block two calls later is safe: finishing
// the call in between required every rank to have finished this one.
Status Group::TinyCall(uint32_t kind, void* buffer, int64_t count, size_t element_size,
                       tutti_dtype dtype, tutti_reduce_op op, char* gathered) {
  const size_t bytes = static_cast<size_t>(count) * element_size;
  const size_t lines = std::max<size_t>(1, (bytes + kTinyBytes - 1) / kTinyBytes);
  const uint32_t desc = kind | (static_cast<uint32_t>(dtype) << 4) |
                        (static_cast<uint32_t>(op) << 8) | (static_cast<uint32_t>(bytes) << 12);
  ++tiny_count_;
  const int parity = static_cast<int>(tiny_count_ & 1);
  const uint32_t seq = static_cast<uint32_t>(tiny_count_ % 0xffffffffULL) + 1;  // never 0
  char* buf = static_cast<char*>(buffer);
  auto line_bytes = [&](size_t line) { return std::min(kTinyBytes, bytes - line * kTinyBytes); };
  for (size_t line = 0; line < lines; ++line) {
    Tiny(rank_, parity, line)->desc = desc;
    if (bytes > 0)
      std::memcpy(Tiny(rank_, parity, line)->data, buf + line * kTinyBytes, line_bytes(line));
    Tiny(rank_, parity, line)->seq.store(seq, std::memory_order_release);
  }
  // A peer asleep on one of our lines is woken at the end of the call (below): every rank
  // writes before it waits, so our waits never depend on a peer we have not woken yet, and
  // the fence there is not on the fast path.
  auto wake_sleepers = [&] {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (Sleepers(rank_)->load(std::memory_order_relaxed) != 0) {
      for (size_t line = 0; line < lines; ++line) FutexWake(&Tiny(rank_, parity, line)->seq);
    }
  };
  for (int j = 0; j < size_; ++j) {
    if (j == rank_) continue;
    // The first line's descriptor tells whether the peer wrote as many lines as we expect.
    SHM_RETURN_IF_ERROR(WaitFor(j, &Tiny(j, parity, 0)->seq, seq, true));
    if (Tiny(j, parity, 0)->desc != desc) {
      const uint32_t other = Tiny(j, parity, 0)->desc;
      return Fail(Status::InvalidArgument(
          "shared-memory group: mismatched collectives: rank " + std::to_string(rank_) +
          " called " + KindName(kind) + " (" + std::to_string(bytes) + " bytes, dtype " +
          std::to_string(static_cast<int>(dtype)) + ", op " + std::to_string(static_cast<int>(op)) +
          ") while rank " + std::to_string(j) + " called " + KindName(other & 15) + " (" +
          std::to_string(other >> 12) + " bytes, dtype " + std::to_string((other >> 4) & 15) +
          ", op " + std::to_string((other >> 8) & 15) + ")"));
    }
    for (size_t line = 1; line < lines; ++line) {
      SHM_RETURN_IF_ERROR(WaitFor(j, &Tiny(j, parity, line)->seq, seq, true));
    }
  }
  wake_sleepers();
  if (kind == kAllgather && bytes > 0) {
    for (int j = 0; j < size_; ++j) {
      if (j == rank_) continue;
      for (size_t line = 0; line < lines; ++line) {
        std::memcpy(gathered + static_cast<size_t>(j) * bytes + line * kTinyBytes,
                    Tiny(j, parity, line)->data, line_bytes(line));
      }
    }
  }
  if (kind == kAllreduce && bytes > 0) {
    // Gather each rank's lines into one contiguous run, so the kernel runs once per rank.
    alignas(kLine) char other[kTinyLines * kTinyBytes];
    auto gather = [&](int j, char* to) {
      for (size_t line = 0; line < lines; ++line) {
        std::memcpy(to + line * kTinyBytes, Tiny(j, parity, line)->data, line_bytes(line));
      }
    };
    if (rank_ != 0) gather(0, buf);    // rank 0's buffer holds x0 already
    for (int j = 1; j < size_; ++j) {  // my own x_j comes from my lines too
      gather(j, other);
      ReduceInto(dtype, op, buf, other, static_cast<size_t>(count));
    }
  }
  return Status::OK();
}

Status Group::AllreduceSmall(char* buffer, int64_t count, size_t es, tutti_dtype dtype,
                             tutti_reduce_op op, const SlotDesc& desc) {
  const size_t bytes = static_cast<size_t>(count) * es;
  // The stores into the slot are planned as a pipelined allreduce's are (single_copy.cc);
  // rank 0 times the whole call, its own copy in included, since that is what the stores
  // change.
  SlotDesc mine = desc;
  const Offer offer = AllreduceOffer(bytes, true);
  const PlannedCall call = PlanCall(bytes, offer, planned_allreduce_[offer.set], &mine);
  const bool streaming = call.plan == kPlanStreaming;
  const int pos = NextSlot();
  SHM_RETURN_IF_ERROR(WaitRoundStart(pos));
  const uint32_t written = NextPhase(), done = NextPhase();
  *Desc(rank_, pos) = mine;
  if (streaming) {
    StreamingCopy(SlotData(rank_, pos), buffer, bytes);
    StreamingFence();
  } else {
    std::memcpy(SlotData(rank_, pos), buffer, bytes);
  }
  Post(Counter(rank_), written);
  SHM_RETURN_IF_ERROR(WaitAll(written));
  SHM_RETURN_IF_ERROR(CheckDescs(pos, mine, "allreduce"));
  const uint32_t rank0_flags = Desc(0, pos)->plan_flags;
  if (rank_ != 0) std::memcpy(buffer, SlotData(0, pos), bytes);  // rank 0's buffer holds x0
  for (int j = 1; j < size_; ++j) {
    ReduceInto(dtype, op, buffer, SlotData(j, pos), static_cast<size_t>(count));
  }
  Post(Counter(rank_), done);
  slot_free_[static_cast<size_t>(pos)] = done;
  if (streaming) ++streaming_calls_;
  FinishPlannedCall(call, bytes, offer, planned_allreduce_[offer.set],
                    streaming ? kPlanStreaming : 0u, rank0_flags);
  return Status::OK();
}

// The spans hold the vector to reduce (one span for a plain in-place allreduce). Elements
// [want_begin, want_end) must be complete in the spans' outputs on return; the rest may hold
// partial results (ReduceScatter needs only its own part).
//
// Chunk k goes through: copy in (post W), reduce my slice once everyone posted W (post R),
// copy the others' slices out once everyone posted R (post D). The loop is skewed by one
// chunk: chunk k+1 is copied in before chunk k is reduced, and chunk k-1 copied out after, so
// a rank that is briefly late (preempted, a slow page) delays the others less. The copies
// from and to the spans happen per chunk, so packing several tensors costs no extra pass.
Status Group::AllreducePipelined(const std::vector<Span>& spans, int64_t count, size_t es,
                                 tutti_dtype dtype, tutti_reduce_op op, const SlotDesc& desc,
                                 int64_t want_begin, int64_t want_end, double factor,
                                 int divisor, bool streaming, uint32_t* rank0_flags) {
  const int64_t chunk = static_cast<int64_t>(options_.chunk_bytes / es);
  const int64_t chunks = (count + chunk - 1) / chunk;
  std::vector<int64_t> starts(spans.size());
  for (size_t i = 0, at = 0; i < spans.size(); at += spans[i].count, ++i) starts[i] = at;
  struct Round {
    int pos;
    uint32_t written, reduced;
  } rounds[4];
  auto slice = [&](int64_t n, int j, int64_t* b, int64_t* e) {
    *b = n * j / size_;
    *e = n * (j + 1) / size_;
  };
  auto elems = [&](int64_t k) { return std::min(chunk, count - k * chunk); };
  const int64_t ses = static_cast<int64_t>(es);
  // Copies into my slot, with streaming stores if so planned (then fenced before a post).
  auto publish = [&](char* to, const char* from, size_t n) {
    if (streaming) {
      StreamingCopy(to, from, n);
    } else {
      std::memcpy(to, from, n);
    }
  };
  // Copies elements [lo, lo + n) of the inputs to `to` (my slot), or `from` to the outputs.
  auto gather = [&](int64_t lo, int64_t n, char* to) {
    ForPieces(spans, starts, es, lo, n, [&](int64_t at, const char* in, char*, int64_t m) {
      publish(to + at * ses, in, static_cast<size_t>(m) * es);
    });
  };
  auto scatter = [&](int64_t lo, int64_t n, const char* from) {
    ForPieces(spans, starts, es, lo, n, [&](int64_t at, const char*, char* out, int64_t m) {
      std::memcpy(out, from + at * ses, static_cast<size_t>(m) * es);
    });
  };

  // Publishes the slices of chunk k that the others reduce (my own slice stays in my buffer).
  auto copy_in = [&](int64_t k) -> Status {
    Round& r = rounds[k & 3];
    r.pos = NextSlot();
    SHM_RETURN_IF_ERROR(WaitRoundStart(r.pos));
    char* mine = SlotData(rank_, r.pos);
    *Desc(rank_, r.pos) = desc;
    const int64_t n = elems(k), e0 = k * chunk;
    int64_t b, e;
    slice(n, rank_, &b, &e);
    gather(e0, b, mine);
    gather(e0 + e, n - e, mine + e * ses);
    if (streaming) StreamingFence();
    r.written = NextPhase();
    Post(Counter(rank_), r.written);
    return Status::OK();
  };

  // Reduces my slice of chunk k across all ranks in rank order, scales it and publishes it
  // in my slot. Rank 0 starts from its own x0; so does the second of two ranks when the op
  // commutes (x1 op x0 == x0 op x1 bit for bit for sums and products, up to which NaN payload
  // survives when both are NaN), which saves it a pass over its slice.
  const bool own_first = rank_ == 0 || (size_ == 2 && (op == TUTTI_REDUCE_SUM ||
                                                       op == TUTTI_REDUCE_PRODUCT));
  if (streaming && !own_first) partial_.resize(options_.chunk_bytes);
  auto reduce = [&](int64_t k) -> Status {
    Round& r = rounds[k & 3];
    SHM_RETURN_IF_ERROR(WaitAll(r.written));
    if (k == 0) {
      SHM_RETURN_IF_ERROR(CheckDescs(r.pos, desc, "allreduce"));
      // A call of one chunk does most of its work, the copy in, before everyone has
      // arrived: rank 0 times it from its start, as a small call.
      const uint32_t flags = AllArrived(r.pos, chunks > 1);
      if (rank0_flags != nullptr) *rank0_flags = flags;
    }
    int64_t b, e;
    slice(elems(k), rank_, &b, &e);
    const size_t m = static_cast<size_t>(e - b);
    if (m > 0) {
      const int64_t lo = k * chunk + b;
      const size_t off = static_cast<size_t>(b) * es, len = m * es;
      char* acc = SlotData(rank_, r.pos) + off;  // my slot's unpublished slice
      if (own_first) {
        // Accumulate in the outputs, piece by piece, then publish: two passes over my slice
        // instead of three (copy x0 in, reduce, copy the sum out).
        ForPieces(spans, starts, es, lo, static_cast<int64_t>(m),
                  [&](int64_t at, const char* in, char* out, int64_t pm) {
                    const size_t n = static_cast<size_t>(pm);
                    const size_t at_bytes = static_cast<size_t>(at) * es;
                    if (out != in) std::memcpy(out, in, n * es);
                    for (int j = 0; j < size_; ++j) {
                      if (j == rank_) continue;
                      ReduceInto(dtype, op, out, SlotData(j, r.pos) + off + at_bytes, n);
                    }
                    ScaleInPlace(dtype, out, n, factor, divisor);
                    publish(acc + at_bytes, out, n * es);
                  });
      } else {  // accumulate in the slot (or, streaming, in private memory), starting from x0
        char* const slot = acc;
        if (streaming) acc = partial_.data();
        std::memcpy(acc, SlotData(0, r.pos) + off, len);
        for (int j = 1; j < size_; ++j) {
          if (j != rank_) {
            ReduceInto(dtype, op, acc, SlotData(j, r.pos) + off, m);
            continue;
          }
          ForPieces(spans, starts, es, lo, static_cast<int64_t>(m),
                    [&](int64_t at, const char* in, char*, int64_t pm) {
                      ReduceInto(dtype, op, acc + at * ses, in, static_cast<size_t>(pm));
                    });
        }
        ScaleInPlace(dtype, acc, m, factor, divisor);
        if (streaming) StreamingCopy(slot, acc, len);
        scatter(lo, static_cast<int64_t>(m), acc);
      }
    }
    if (streaming) StreamingFence();
    r.reduced = NextPhase();
    Post(Counter(rank_), r.reduced);
    return Status::OK();
  };

  // Copies the others' reduced slices of chunk k out (those the caller wants) and frees the slot.
  auto copy_out = [&](int64_t k) -> Status {
    Round& r = rounds[k & 3];
    SHM_RETURN_IF_ERROR(WaitAll(r.reduced));
    const int64_t n = elems(k), e0 = k * chunk;
    for (int j = 0; j < size_; ++j) {
      if (j == rank_) continue;
      int64_t b, e, start;
      slice(n, j, &b, &e);
      const int64_t len = Overlap(want_begin, want_end, e0 + b, e - b, &start);
      if (len > 0) scatter(start, len, SlotData(j, r.pos) + (start - e0) * ses);
    }
    const uint32_t done = NextPhase();
    Post(Counter(rank_), done);
    slot_free_[static_cast<size_t>(r.pos)] = done;
    return Status::OK();
  };

  // Every rank posts in the same order (W0, then per k: W k+1, R k, D k-1), so the phase
  // numbers agree. With three or more slots, chunk k+1's slot was last used by chunk k-2,
  // whose D every rank posts before it can wait for anything of chunk k.
  SHM_RETURN_IF_ERROR(copy_in(0));
  for (int64_t k = 0; k < chunks; ++k) {
    if (k + 1 < chunks) SHM_RETURN_IF_ERROR(copy_in(k + 1));
    SHM_RETURN_IF_ERROR(reduce(k));
    if (k > 0) SHM_RETURN_IF_ERROR(copy_out(k - 1));
  }
  return copy_out(chunks - 1);
}

// The buffer lies in this rank's scratch memory, at the same offset as on every other rank:
// each rank reduces its slice reading everyone's buffer in place, then copies the others'
// slices out of their buffers. A final synchronisation keeps the caller from refilling its
// buffer while a peer still reads it.
Status Group::AllreduceDirect(char* buffer, int64_t count, size_t es, tutti_dtype dtype,
                              tutti_reduce_op op, const SlotDesc& call, int64_t want_begin,
                              int64_t want_end) {
  const size_t offset = static_cast<size_t>(buffer - Scratch(rank_));
  SlotDesc desc = call;
  desc.kind = kAllreduceScratch;
  desc.own_bytes = offset;
  const int pos = NextSlot();  // for the descriptor, and as room for partial sums
  SHM_RETURN_IF_ERROR(WaitRoundStart(pos));
  *Desc(rank_, pos) = desc;
  const uint32_t ready = NextPhase();
  Post(Counter(rank_), ready);
  SHM_RETURN_IF_ERROR(WaitAll(ready));
  SHM_RETURN_IF_ERROR(CheckDescs(pos, desc, "allreduce on scratch memory"));
  for (int j = 0; j < size_; ++j) {
    if (j != rank_ && Desc(j, pos)->own_bytes != offset) {
      return Fail(Status::InvalidArgument(
          "shared-memory allreduce: the buffer is at offset " + std::to_string(offset) +
          " of the scratch memory on rank " + std::to_string(rank_) + " but at " +
          std::to_string(Desc(j, pos)->own_bytes) + " on rank " + std::to_string(j)));
    }
  }
  auto data = [&](int j) { return Scratch(j) + offset; };
  const int64_t b = count * rank_ / size_, e = count * (rank_ + 1) / size_;
  if (rank_ == 0) {  // my buffer holds x0: accumulate in place
    for (int j = 1; j < size_; ++j) {
      ReduceInto(dtype, op, buffer + b * static_cast<int64_t>(es),
                 data(j) + b * static_cast<int64_t>(es), static_cast<size_t>(e - b));
    }
  } else {  // start from x0 in a slot, a chunk at a time, then overwrite my own values
    char* acc = SlotData(rank_, pos);
    const int64_t step = static_cast<int64_t>(options_.chunk_bytes / es);
    for (int64_t lo = b; lo < e; lo += step) {
      const size_t m = static_cast<size_t>(std::min(step, e - lo));
      const size_t at = static_cast<size_t>(lo) * es;
      std::memcpy(acc, data(0) + at, m * es);
      for (int j = 1; j < size_; ++j) ReduceInto(dtype, op, acc, data(j) + at, m);
      std::memcpy(buffer + at, acc, m * es);
    }
  }
  const uint32_t reduced = NextPhase();
  Post(Counter(rank_), reduced);
  SHM_RETURN_IF_ERROR(WaitAll(reduced));
  for (int j = 0; j < size_; ++j) {
    if (j == rank_) continue;
    int64_t start;
    const int64_t len = Overlap(want_begin, want_end, count * j / size_,
                                count * (j + 1) / size_ - count * j / size_, &start);
    if (len > 0) {
      const size_t at = static_cast<size_t>(start) * es;
      std::memcpy(buffer + at, data(j) + at, static_cast<size_t>(len) * es);
    }
  }
  const uint32_t done = NextPhase();
  Post(Counter(rank_), done);
  SHM_RETURN_IF_ERROR(WaitAll(done));
  slot_free_[static_cast<size_t>(pos)] = done;
  return Status::OK();
}

Status Group::AllreduceImpl(void* buffer, int64_t count, tutti_dtype dtype, tutti_reduce_op op,
                            int64_t want_begin, int64_t want_end) {
  if (failed_.load(std::memory_order_acquire)) return status();
  if (!IsValidDtype(dtype) || !IsValidReduceOp(op) || op == TUTTI_REDUCE_AVERAGE ||
      op == TUTTI_REDUCE_ADASUM) {
    return Fail(Status::InvalidArgument(
        "shared-memory allreduce: dtype " + std::to_string(static_cast<int>(dtype)) + " / op " +
        std::to_string(static_cast<int>(op)) + " unsupported (SUM, MIN, MAX, PRODUCT only)"));
  }
  if (count < 0) return Fail(Status::InvalidArgument("shared-memory allreduce: negative count"));
  if (count == 0 || size_ == 1) return Status::OK();
  const size_t es = DtypeSize(dtype);
  const size_t bytes = static_cast<size_t>(count) * es;
  if (bytes <= kTinyLines * kTinyBytes) return TinyCall(kAllreduce, buffer, count, es, dtype, op);
  SlotDesc desc;
  desc.kind = kAllreduce;
  desc.aux = static_cast<uint32_t>(dtype) | (static_cast<uint32_t>(op) << 8);
  desc.total_bytes = bytes;
  desc.own_bytes = bytes;
  char* buf = static_cast<char*>(buffer);
  if (bytes <= options_.small_bytes) return AllreduceSmall(buf, count, es, dtype, op, desc);
  // In scratch memory, reading the peers' buffers in place pays off once there is more than
  // one chunk (measured: below that the one-chunk pipeline is as fast or faster).
  if (bytes > options_.chunk_bytes && options_.scratch_bytes > 0 && buf >= Scratch(rank_) &&
      buf + bytes <= Scratch(rank_) + options_.scratch_bytes) {
    return AllreduceDirect(buf, count, es, dtype, op, desc, want_begin, want_end);
  }
  return AllreduceLarge({Span{buf, buf, count}}, count, es, dtype, op, desc, want_begin, want_end,
                        1.0, 1);
}

Status Group::Allreduce(void* buffer, int64_t count, tutti_dtype dtype, tutti_reduce_op op) {
  return AllreduceImpl(buffer, count, dtype, op, 0, count);
}

Status Group::AllreduceSpans(const std::vector<Span>& spans, tutti_dtype dtype,
                             tutti_reduce_op op, double factor, int divisor) {
  if (failed_.load(std::memory_order_acquire)) return status();
  int64_t count = 0;
  for (const Span& span : spans) {
    if (span.count < 0) return Fail(Status::InvalidArgument("shared-memory allreduce: negative count"));
    count += span.count;
  }
  const size_t es = IsValidDtype(dtype) ? DtypeSize(dtype) : 0;
  const size_t bytes = static_cast<size_t>(count) * es;
  if (bytes > options_.small_bytes && size_ > 1 && IsValidReduceOp(op) &&
      op != TUTTI_REDUCE_AVERAGE && op != TUTTI_REDUCE_ADASUM) {
    SlotDesc desc;
    desc.kind = kAllreduce;
    desc.aux = static_cast<uint32_t>(dtype) | (static_cast<uint32_t>(op) << 8);
    desc.total_bytes = bytes;
    desc.own_bytes = bytes;
    return AllreduceLarge(spans, count, es, dtype, op, desc, 0, count, factor, divisor);
  }
  // Small (or invalid: AllreduceImpl explains): packed into one buffer, the one-synchronisation
  // protocols beat a pipeline.
  const bool packed = !(spans.size() == 1 && spans[0].in == spans[0].out);
  char* buffer = spans.empty() ? nullptr : static_cast<char*>(spans[0].out);
  if (packed) {
    gathered_.resize(std::max<size_t>(bytes, 1));
    buffer = gathered_.data();
    size_t at = 0;
    for (const Span& span : spans) {
      const size_t n = static_cast<size_t>(span.count) * es;
      if (n > 0) std::memcpy(buffer + at, span.in, n);
      at += n;
    }
  }
  SHM_RETURN_IF_ERROR(AllreduceImpl(buffer, count, dtype, op, 0, count));
  ScaleInPlace(dtype, buffer, static_cast<size_t>(count), factor, divisor);
  if (packed) {
    size_t at = 0;
    for (const Span& span : spans) {
      const size_t n = static_cast<size_t>(span.count) * es;
      if (n > 0) std::memcpy(span.out, buffer + at, n);
      at += n;
    }
  }
  return Status::OK();
}

Status Group::ReduceScatter(int set_rank, void* buffer, const std::vector<int64_t>& counts,
                            void* output, tutti_dtype dtype, tutti_reduce_op op) {
  if (failed_.load(std::memory_order_acquire)) return status();
  if (set_rank != rank_ || counts.size() != static_cast<size_t>(size_)) {
    return Fail(Status::InvalidArgument(
        "shared-memory reducescatter: set_rank " + std::to_string(set_rank) + " / " +
        std::to_string(counts.size()) + " counts do not match rank " + std::to_string(rank_) +
        " of " + std::to_string(size_)));
  }
  int64_t total = 0, begin = 0;
  for (int j = 0; j < size_; ++j) {
    if (counts[j] < 0)
      return Fail(Status::InvalidArgument("shared-memory reducescatter: negative count"));
    if (j == rank_) begin = total;
    total += counts[j];
  }
  SHM_RETURN_IF_ERROR(AllreduceImpl(buffer, total, dtype, op, begin, begin + counts[rank_]));
  const size_t es = DtypeSize(dtype);
  if (counts[rank_] > 0) {
    std::memmove(output, static_cast<char*>(buffer) + begin * static_cast<int64_t>(es),
                 static_cast<size_t>(counts[rank_]) * es);
  }
  return Status::OK();
}

Status Group::Barrier() {
  if (failed_.load(std::memory_order_acquire)) return status();
  if (size_ == 1) return Status::OK();
  return TinyCall(kBarrier, nullptr, 0, 1, TUTTI_UINT8, TUTTI_REDUCE_SUM);
}

Status Group::Broadcast(void* buffer, int64_t bytes, int root) {
  if (failed_.load(std::memory_order_acquire)) return status();
  if (root < 0 || root >= size_ || bytes < 0) {
    return Fail(Status::InvalidArgument("shared-memory broadcast: root " + std::to_string(root) +
                                        " / " + std::to_string(bytes) +
                                        " bytes invalid for a group of " + std::to_string(size_)));
  }
  if (bytes == 0 || size_ == 1) return Status::OK();
  SlotDesc desc;
  desc.kind = kBroadcast;
  desc.aux = static_cast<uint32_t>(root);
  desc.total_bytes = static_cast<uint64_t>(bytes);
  desc.own_bytes = static_cast<uint64_t>(bytes);
  char* buf = static_cast<char*>(buffer);
  // A large broadcast may take a single copy (single_copy.cc): the root decides and says so
  // in the first round's descriptor, with its buffer's address in place of the data.
  const bool may_single = MaySingleCopy(static_cast<size_t>(bytes));
  const bool measure = may_single && rank_ == root &&
                       options_.single_copy == Options::SingleCopy::kAuto;
  if (may_single && rank_ == root) {
    desc.plan_flags = !measure || broadcast_choice_->Next(static_cast<size_t>(bytes)) == 1;
  }
  const int64_t start = NowNs();
  uint32_t last_done = 0;
  const int64_t chunk = static_cast<int64_t>(options_.chunk_bytes);
  for (int64_t lo = 0; lo < bytes; lo += chunk) {
    const size_t n = static_cast<size_t>(std::min(chunk, bytes - lo));
    const int pos = NextSlot();
    const uint32_t written = NextPhase(), done = NextPhase();
    last_done = done;
    if (rank_ == root && desc.plan_flags != 0) {
      SHM_RETURN_IF_ERROR(BroadcastSingleCopy(buf, bytes, root, desc, pos, written, done));
      if (measure) broadcast_choice_->Record(static_cast<size_t>(bytes), 1, NowNs() - start);
      return Status::OK();
    }
    if (rank_ == root) {
      SHM_RETURN_IF_ERROR(WaitRoundStart(pos));
      *Desc(rank_, pos) = desc;
      std::memcpy(SlotData(rank_, pos), buf + lo, n);
      Post(Counter(rank_), done);  // also reaches `written`
    } else {
      SHM_RETURN_IF_ERROR(WaitFor(root, Counter(root), written, false));
      const SlotDesc& d = *Desc(root, pos);
      if (d.kind != desc.kind || d.aux != desc.aux || d.total_bytes != desc.total_bytes) {
        return Fail(Status::InvalidArgument(
            "shared-memory group: mismatched collectives: rank " + std::to_string(rank_) +
            " called broadcast of " + std::to_string(bytes) + " bytes from root " +
            std::to_string(root) + " while the root called " + KindName(d.kind) + " (" +
            std::to_string(d.total_bytes) + " bytes, parameter " + std::to_string(d.aux) + ")"));
      }
      if (lo == 0 && d.plan_flags != 0 && may_single) {
        return BroadcastSingleCopy(buf, bytes, root, desc, pos, written, done);
      }
      std::memcpy(buf + lo, SlotData(root, pos), n);
      Post(Counter(rank_), done);
    }
    slot_free_[static_cast<size_t>(pos)] = done;
  }
  if (measure) {  // time the pipeline to the end on every rank, as the single copy is timed
    SHM_RETURN_IF_ERROR(WaitAll(last_done));
    broadcast_choice_->Record(static_cast<size_t>(bytes), 0, NowNs() - start);
  }
  return Status::OK();
}

Status Group::AllgatherEqual(const void* input, void* output, int64_t bytes) {
  if (failed_.load(std::memory_order_acquire)) return status();
  if (bytes < 0 || static_cast<size_t>(bytes) > kTinyLines * kTinyBytes || size_ == 1) {
    return Allgatherv(input, output, std::vector<int64_t>(size_, bytes), 1);
  }
  char* out = static_cast<char*>(output);
  char* own = out + static_cast<int64_t>(rank_) * bytes;
  if (bytes > 0 && own != input) std::memmove(own, input, static_cast<size_t>(bytes));
  // Every rank names its part's size in the lines' descriptor, so unequal parts fail there.
  return TinyCall(kAllgather, own, bytes, 1, TUTTI_UINT8, TUTTI_REDUCE_SUM, out);
}

Status Group::Allgatherv(const void* input, void* output, const std::vector<int64_t>& counts,
                         size_t element_size) {
  if (failed_.load(std::memory_order_acquire)) return status();
  if (counts.size() != static_cast<size_t>(size_) || element_size == 0) {
    return Fail(
        Status::InvalidArgument("shared-memory allgather: " + std::to_string(counts.size()) +
                                " counts for a group of " + std::to_string(size_)));
  }
  std::vector<int64_t> bytes(size_), offset(size_);
  int64_t total = 0, most = 0;
  for (int j = 0; j < size_; ++j) {
    if (counts[j] < 0)
      return Fail(Status::InvalidArgument("shared-memory allgather: negative count"));
    bytes[j] = counts[j] * static_cast<int64_t>(element_size);
    offset[j] = total;
    total += bytes[j];
    most = std::max(most, bytes[j]);
  }
  char* out = static_cast<char*>(output);
  const char* in = static_cast<const char*>(input);
  if (bytes[rank_] > 0 && out + offset[rank_] != in) {
    std::memmove(out + offset[rank_], in, static_cast<size_t>(bytes[rank_]));
  }
  if (most == 0 || size_ == 1) return Status::OK();
  SlotDesc desc;
  desc.kind = kAllgather;
  desc.aux = static_cast<uint32_t>(element_size);
  desc.total_bytes = static_cast<uint64_t>(total);
  desc.own_bytes = static_cast<uint64_t>(bytes[rank_]);
  // A large allgather may take a single copy, planned as allreduce's is (single_copy.cc).
  const bool may_single = MaySingleCopy(static_cast<size_t>(total));
  Offer offer;
  PlannedCall call;
  if (may_single) {
    if (options_.single_copy != Options::SingleCopy::kAlways) offer.plans[offer.count++] = 0;
    offer.plans[offer.count++] = kPlanSingleCopy;
    offer.choice = offer.count > 1 ? allgather_choice_ : nullptr;
    call = PlanCall(static_cast<size_t>(total), offer, planned_allgather_, &desc);
  }
  const bool single = call.plan == kPlanSingleCopy;
  uint32_t rank0_flags = 0;
  if (single) {
    SHM_RETURN_IF_ERROR(AllgatherSingleCopy(out, bytes, offset, desc, &rank0_flags));
  }
  const int64_t chunk = static_cast<int64_t>(options_.chunk_bytes);
  for (int64_t lo = 0; lo < most && !single; lo += chunk) {
    const int pos = NextSlot();
    SHM_RETURN_IF_ERROR(WaitRoundStart(pos));
    const uint32_t written = NextPhase(), done = NextPhase();
    *Desc(rank_, pos) = desc;
    const int64_t mine = std::max<int64_t>(0, std::min(chunk, bytes[rank_] - lo));
    // The own part already sits in output; copy from there in case input aliases it.
    if (mine > 0)
      std::memcpy(SlotData(rank_, pos), out + offset[rank_] + lo, static_cast<size_t>(mine));
    Post(Counter(rank_), written);
    SHM_RETURN_IF_ERROR(WaitAll(written));
    if (lo == 0) {
      SHM_RETURN_IF_ERROR(CheckAllgatherDescs(pos, desc, bytes));
      rank0_flags = AllArrived(pos);
    }
    for (int j = 0; j < size_; ++j) {
      if (j == rank_) continue;
      const int64_t n = std::max<int64_t>(0, std::min(chunk, bytes[j] - lo));
      if (n > 0) std::memcpy(out + offset[j] + lo, SlotData(j, pos), static_cast<size_t>(n));
    }
    Post(Counter(rank_), done);
    slot_free_[static_cast<size_t>(pos)] = done;
  }
  if (may_single) {
    FinishPlannedCall(call, static_cast<size_t>(total), offer, planned_allgather_, call.plan,
                      rank0_flags);
  }
  return Status::OK();
}

Status Group::CheckAllgatherDescs(int pos, const SlotDesc& desc, const std::vector<int64_t>& bytes) {
  SHM_RETURN_IF_ERROR(CheckDescs(pos, desc, "allgather"));
  for (int j = 0; j < size_; ++j) {
    if (j != rank_ && Desc(j, pos)->own_bytes != static_cast<uint64_t>(bytes[j])) {
      return Fail(Status::InvalidArgument(
          "shared-memory allgather: rank " + std::to_string(rank_) + " expects " +
          std::to_string(bytes[j]) + " bytes from rank " + std::to_string(j) + ", which sends " +
          std::to_string(Desc(j, pos)->own_bytes)));
    }
  }
  return Status::OK();
}

// Each round moves the next chunk_bytes of every rank's whole send buffer; a receiver copies
// the part of each sender's window that falls into the block addressed to it. The slot also
// carries the sender's per-destination byte counts, from which receivers find their blocks.
Status Group::Alltoallv(const void* input, const std::vector<int64_t>& send_counts, void* output,
                        const std::vector<int64_t>& recv_counts, size_t element_size) {
  if (failed_.load(std::memory_order_acquire)) return status();
  const size_t n = static_cast<size_t>(size_);
  if (send_counts.size() != n || recv_counts.size() != n || element_size == 0) {
    return Fail(Status::InvalidArgument(
        "shared-memory alltoall: counts do not match the group size " + std::to_string(size_)));
  }
  const int64_t es = static_cast<int64_t>(element_size);
  std::vector<int64_t> send_off(n), recv_off(n);
  int64_t send_total = 0, recv_total = 0;
  for (size_t j = 0; j < n; ++j) {
    if (send_counts[j] < 0 || recv_counts[j] < 0) {
      return Fail(Status::InvalidArgument("shared-memory alltoall: negative count"));
    }
    send_off[j] = send_total;
    recv_off[j] = recv_total;
    send_total += send_counts[j] * es;
    recv_total += recv_counts[j] * es;
  }
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  if (send_counts[rank_] != recv_counts[rank_]) {
    return Fail(Status::InvalidArgument("shared-memory alltoall: rank " + std::to_string(rank_) +
                                        " sends itself " + std::to_string(send_counts[rank_]) +
                                        " elements but expects " +
                                        std::to_string(recv_counts[rank_])));
  }
  if (size_ == 1) {
    if (send_total > 0) std::memmove(out, in, static_cast<size_t>(send_total));
    return Status::OK();
  }
  SlotDesc desc;
  desc.kind = kAlltoall;
  desc.aux = static_cast<uint32_t>(element_size);
  desc.total_bytes = 0;  // differs per rank; the counts are checked instead
  desc.own_bytes = static_cast<uint64_t>(send_total);
  const int64_t chunk = static_cast<int64_t>(options_.chunk_bytes);
  std::vector<int64_t> disp(n, 0), len(n, 0), sender_total(n, 0);  // blocks addressed to me
  int64_t rounds = 1;
  for (int64_t k = 0; k < rounds; ++k) {
    const int64_t lo = k * chunk;
    const int pos = NextSlot();
    SHM_RETURN_IF_ERROR(WaitRoundStart(pos));
    const uint32_t written = NextPhase(), done = NextPhase();
    *Desc(rank_, pos) = desc;
    int64_t* counts = SlotCounts(rank_, pos);
    for (size_t j = 0; j < n; ++j) counts[j] = send_counts[j] * es;
    const int64_t mine = std::max<int64_t>(0, std::min(chunk, send_total - lo));
    if (mine > 0) std::memcpy(SlotData(rank_, pos), in + lo, static_cast<size_t>(mine));
    Post(Counter(rank_), written);
    SHM_RETURN_IF_ERROR(WaitAll(written));
    if (k == 0) {
      SHM_RETURN_IF_ERROR(CheckDescs(pos, desc, "alltoall"));
      int64_t most = 0;
      for (int i = 0; i < size_; ++i) {
        const int64_t* theirs = SlotCounts(i, pos);
        int64_t before = 0;
        for (int j = 0; j < rank_; ++j) before += theirs[j];
        disp[i] = before;
        len[i] = theirs[rank_];
        sender_total[i] = static_cast<int64_t>(Desc(i, pos)->own_bytes);
        if (i == rank_) sender_total[i] = send_total;
        most = std::max(most, sender_total[i]);
        if (len[i] != recv_counts[i] * es) {
          return Fail(Status::InvalidArgument(
              "shared-memory alltoall: rank " + std::to_string(rank_) + " expects " +
              std::to_string(recv_counts[i] * es) + " bytes from rank " + std::to_string(i) +
              ", which sends " + std::to_string(len[i])));
        }
      }
      rounds = std::max<int64_t>(1, (most + chunk - 1) / chunk);
      if (len[rank_] > 0) {
        std::memcpy(out + recv_off[rank_], in + send_off[rank_], static_cast<size_t>(len[rank_]));
      }
    }
    for (int i = 0; i < size_; ++i) {
      if (i == rank_) continue;
      const int64_t window = std::max<int64_t>(0, std::min(chunk, sender_total[i] - lo));
      int64_t start;
      const int64_t m = Overlap(disp[i], disp[i] + len[i], lo, window, &start);
      if (m > 0) {
        std::memcpy(out + recv_off[i] + (start - disp[i]), SlotData(i, pos) + (start - lo),
                    static_cast<size_t>(m));
      }
    }
    Post(Counter(rank_), done);
    slot_free_[static_cast<size_t>(pos)] = done;
  }
  return Status::OK();
}

}  // namespace shm
}  // namespace tutti
