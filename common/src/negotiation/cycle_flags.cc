#include "negotiation/cycle_flags.h"

namespace tutti {
namespace {

enum HeaderBit : uint64_t {
  kNegotiate = 1u << 0,
  kShutdown = 1u << 1,
  kJoined = 1u << 2,
  kBusy = 1u << 3,
  // All-rank facts in the header (plain, not inverted).
  kBusyEverywhere = 1u << 4,
};

size_t BitmapWords(int slots) { return SlotBits::WordsFor(slots); }

// Word i of `bits` (0 past its end), within the first `slots` slots.
uint64_t WordOf(const SlotBits& bits, size_t i) {
  return i < bits.words().size() ? bits.words()[i] : 0;
}

// Mask of the slots of word i that exist.
uint64_t ValidMask(int slots, size_t i) {
  const int64_t left = static_cast<int64_t>(slots) - static_cast<int64_t>(i) * 64;
  return left >= 64 ? ~uint64_t(0) : (uint64_t(1) << left) - 1;
}

}  // namespace

size_t FlagWords(int slots) { return 1 + 2 * BitmapWords(slots); }

std::vector<uint64_t> EncodeFlags(const CycleFlags& mine, int slots) {
  const size_t n = BitmapWords(slots);
  std::vector<uint64_t> words(FlagWords(slots), 0);
  uint64_t header = 0;
  if (mine.negotiate) header |= kNegotiate;
  if (mine.shutdown) header |= kShutdown;
  if (mine.joined) header |= kJoined;
  if (mine.busy) header |= kBusy;
  words[0] = (~header & ~uint64_t(kBusyEverywhere)) | (mine.busy ? kBusyEverywhere : 0);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t valid = ValidMask(slots, i);
    words[1 + i] = WordOf(mine.ready, i) & valid;
    words[1 + n + i] = ~(WordOf(mine.invalidate, i) & valid);
  }
  return words;
}

CycleFlags DecodeAgreedFlags(const std::vector<uint64_t>& all_anded, int slots) {
  const size_t n = BitmapWords(slots);
  CycleFlags agreed;
  const uint64_t any = ~all_anded[0];
  agreed.negotiate = any & kNegotiate;
  agreed.shutdown = any & kShutdown;
  agreed.joined = any & kJoined;
  agreed.busy = any & kBusy;
  agreed.busy_everywhere = all_anded[0] & kBusyEverywhere;
  agreed.ready = SlotBits(slots);
  agreed.invalidate = SlotBits(slots);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t valid = ValidMask(slots, i);
    agreed.ready.words()[i] = all_anded[1 + i] & valid;
    agreed.invalidate.words()[i] = ~all_anded[1 + n + i] & valid;
  }
  return agreed;
}

}  // namespace tutti
