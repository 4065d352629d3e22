#include "negotiation/cycle_flags.h"

namespace tutti {
namespace {

enum HeaderBit : uint64_t {
  kNegotiate = 1u << 0,
  kShutdown = 1u << 1,
  kJoined = 1u << 2,
  kBusy = 1u << 3,
};

size_t BitmapWords(int slots) { return (static_cast<size_t>(slots) + 63) / 64; }

bool Bit(const std::vector<uint64_t>& words, size_t first_word, int i) {
  return (words[first_word + i / 64] >> (i % 64)) & 1u;
}

void SetBit(std::vector<uint64_t>* words, size_t first_word, int i, bool value) {
  const uint64_t mask = uint64_t(1) << (i % 64);
  uint64_t& word = (*words)[first_word + i / 64];
  word = value ? (word | mask) : (word & ~mask);
}

}  // namespace

size_t FlagWords(int slots) { return 1 + 2 * BitmapWords(slots); }

std::vector<uint64_t> EncodeFlags(const CycleFlags& mine, int slots) {
  std::vector<uint64_t> words(FlagWords(slots), 0);
  uint64_t header = 0;
  if (mine.negotiate) header |= kNegotiate;
  if (mine.shutdown) header |= kShutdown;
  if (mine.joined) header |= kJoined;
  if (mine.busy) header |= kBusy;
  words[0] = ~header;
  const size_t ready_at = 1, invalidate_at = 1 + BitmapWords(slots);
  for (int i = 0; i < slots; ++i) {
    SetBit(&words, ready_at, i, i < static_cast<int>(mine.ready.size()) && mine.ready[i]);
    const bool invalidate = i < static_cast<int>(mine.invalidate.size()) && mine.invalidate[i];
    SetBit(&words, invalidate_at, i, !invalidate);
  }
  return words;
}

CycleFlags DecodeAgreedFlags(const std::vector<uint64_t>& all_anded, int slots) {
  CycleFlags agreed;
  const uint64_t any = ~all_anded[0];
  agreed.negotiate = any & kNegotiate;
  agreed.shutdown = any & kShutdown;
  agreed.joined = any & kJoined;
  agreed.busy = any & kBusy;
  const size_t ready_at = 1, invalidate_at = 1 + BitmapWords(slots);
  agreed.ready.resize(slots);
  agreed.invalidate.resize(slots);
  for (int i = 0; i < slots; ++i) {
    agreed.ready[i] = Bit(all_anded, ready_at, i);
    agreed.invalidate[i] = !Bit(all_anded, invalidate_at, i);
  }
  return agreed;
}

}  // namespace tutti
