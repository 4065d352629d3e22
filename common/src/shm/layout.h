// The layout of a group's shared segment. Every rank computes the same offsets from (size,
// chunk_bytes, ring_slots); rank 0 records them in the header and the others check them.
//
//   Header        magic, parameters, the abort word and message            (one page)
//   counters      one cache line per rank: its phase counter (written by that rank only)
//   sleepers      one line per rank: how many peers sleep on that rank's words (futex)
//   peers         one line per rank: pid and start time, for liveness checks; the address
//                 and outcome of its single-copy probe
//   tiny          per rank two blocks (alternating calls) of kTinyLines lines, each a
//                 sequence word, a call descriptor and 56 data bytes
//   slots         per rank a ring of ring_slots slots; a slot is a 64-byte descriptor,
//                 size * 8 bytes of per-destination counts (alltoall), then chunk_bytes of data
//   scratch       per rank scratch_bytes that the caller may fill directly (ScratchBuffer)
//
// Each line has a single writer; the data of a slot is written by its owner only.
#ifndef TUTTI_SRC_SHM_LAYOUT_H_
#define TUTTI_SRC_SHM_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "shm/platform.h"

namespace tutti {
namespace shm {

constexpr size_t kLine = 64;
constexpr uint64_t kMagic = 0x316d68732d747475ULL;  // "utt-shm1"
constexpr size_t kTinyBytes = 56;                   // data bytes per tiny line
constexpr size_t kTinyLines = 32;  // tiny calls carry up to kTinyLines * kTinyBytes bytes
// Lines per rank in the tiny area: two blocks plus padding, so that the same line of two ranks
// is not 4 KiB apart (loads and stores 4 KiB apart falsely depend on each other).
constexpr size_t kTinyStride = 2 * kTinyLines + 2;

inline size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

struct Header {
  std::atomic<uint64_t> magic;  // stored last by the creator
  uint64_t segment_bytes;
  uint64_t chunk_bytes;
  uint64_t scratch_bytes;
  uint64_t single_copy_bytes;  // 0 when single copies are off
  int32_t single_copy_mode;    // Group::Options::SingleCopy
  int32_t size;
  int32_t ring_slots;
  std::atomic<int32_t> attached;                    // ranks that mapped the segment during Create
  alignas(kLine) std::atomic<uint32_t> abort_word;  // 0 = fine, 1 = being raised, 2 = raised
  int32_t abort_rank;
  char abort_message[512];
};

struct alignas(kLine) CounterLine {
  std::atomic<uint32_t> value;
};
struct alignas(kLine) SleepersLine {
  std::atomic<uint32_t> count;
};
struct alignas(kLine) PeerLine {
  ProcessId id;
  uint64_t probe_address;  // a word of this process that peers read to test single copies
  std::atomic<uint32_t> can_read_peers;  // 1: this rank read and wrote every peer's word, 2: not
  std::atomic<int32_t> waiting_cpu;      // the CPU of this rank's last wait that yielded
};
struct alignas(kLine) TinyLine {
  std::atomic<uint32_t> seq;  // the tiny call's sequence number once data is valid
  uint32_t desc;              // kind, dtype, op, byte count: catches mismatched calls
  unsigned char data[kTinyBytes];
};
static_assert(sizeof(TinyLine) == kLine, "flag and data share one cache line");

// Written by a slot's owner with its data: what call this is, so that ranks that disagree
// get an error instead of garbage.
struct alignas(kLine) SlotDesc {
  uint32_t kind = 0;
  uint32_t aux = 0;          // dtype/op or root
  uint64_t total_bytes = 0;  // same on every rank
  uint64_t own_bytes = 0;    // this rank's contribution
  // Large calls whose algorithm is planned: the deciding rank's plan for the next call of the
  // size class (internal::kPlanSingleCopy, kPlanStreaming), and internal::kTableFits set by a
  // rank whose buffer table fits the slot; span_count entries follow.
  uint32_t plan_flags = 0;
  uint32_t span_count = 0;
};

struct Layout {
  size_t counters, sleepers, peers, tiny, slots, scratch;  // offsets
  size_t scratch_stride;
  size_t slot_stride, slot_counts, slot_data;  // within a slot
  size_t rank_slots_bytes;
  size_t total;

  Layout(int size, size_t chunk_bytes, int ring_slots, size_t scratch_bytes) {
    const size_t n = static_cast<size_t>(size);
    counters = RoundUp(sizeof(Header), 4096);
    sleepers = counters + n * kLine;
    peers = sleepers + n * kLine;
    tiny = peers + n * kLine;
    slots = RoundUp(tiny + n * kTinyStride * kLine, 4096);
    slot_counts = kLine;
    slot_data = RoundUp(slot_counts + n * sizeof(int64_t), 4096);
    slot_stride = RoundUp(slot_data + chunk_bytes, 4096);
    rank_slots_bytes = slot_stride * static_cast<size_t>(ring_slots);
    scratch = slots + n * rank_slots_bytes;
    scratch_stride = RoundUp(scratch_bytes, 4096);
    total = scratch + n * scratch_stride;
  }
};

}  // namespace shm
}  // namespace tutti

#endif  // TUTTI_SRC_SHM_LAYOUT_H_
