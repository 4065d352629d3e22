// What each rank contributes to the one bitwise AND that opens every negotiation cycle, and
// what the ranks agree on from its result. "All ranks" facts (cache slot i is ready
// everywhere) are plain bits; "any rank" facts (someone needs a full negotiation, wants slot
// i invalidated, ...) are stored inverted, because NOT(AND(NOT x)) is OR(x).
#ifndef TUTTI_SRC_CYCLE_FLAGS_H_
#define TUTTI_SRC_CYCLE_FLAGS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tutti {

// A set of cache slots, 64 to a word: a cycle costs O(slots / 64) plus the slots set, not a
// visit of every slot.
class SlotBits {
 public:
  SlotBits() = default;
  explicit SlotBits(int slots) : slots_(slots), words_(WordsFor(slots), 0) {}

  static size_t WordsFor(int slots) { return (static_cast<size_t>(slots) + 63) / 64; }
  int size() const { return slots_; }
  bool Test(int slot) const {
    return slot >= 0 && slot < slots_ && ((words_[slot / 64] >> (slot % 64)) & 1u);
  }
  void Set(int slot) { words_[slot / 64] |= uint64_t(1) << (slot % 64); }
  void Reset(int slot) { words_[slot / 64] &= ~(uint64_t(1) << (slot % 64)); }
  void Clear() { std::fill(words_.begin(), words_.end(), 0); }
  bool Any() const {
    for (uint64_t w : words_) {
      if (w != 0) return true;
    }
    return false;
  }
  // The slots up to the last word that has one set (0 when none): the same on every rank
  // for the response cache's occupied slots, so the flag exchange can stop there.
  int UsedSlots() const {
    for (size_t w = words_.size(); w > 0; --w) {
      if (words_[w - 1] != 0) return std::min(slots_, static_cast<int>(w * 64));
    }
    return 0;
  }
  int Count() const {
    int n = 0;
    for (uint64_t w : words_) n += __builtin_popcountll(w);
    return n;
  }
  // Calls fn(slot) for every slot in the set, in ascending order.
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (size_t w = 0; w < words_.size(); ++w) {
      for (uint64_t bits = words_[w]; bits != 0; bits &= bits - 1) {
        fn(static_cast<int>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
      }
    }
  }
  const std::vector<uint64_t>& words() const { return words_; }
  std::vector<uint64_t>& words() { return words_; }

 private:
  int slots_ = 0;
  std::vector<uint64_t> words_;
};

struct CycleFlags {
  // Any-rank facts.
  bool negotiate = false;  // requests (or announcements) for the coordinator
  bool shutdown = false;   // asks the job to stop
  bool joined = false;     // has joined: the cache path is off until the join completes
  bool busy = false;       // requests in flight (keeps the others cycling promptly)
  SlotBits invalidate;     // per cache slot
  // All-rank facts.
  bool busy_everywhere = false;  // agreed only: every rank has requests in flight (`busy`)
  SlotBits ready;  // per cache slot
};

// Words for `slots` cache slots: one header word, then the ready and invalidate bitmaps.
size_t FlagWords(int slots);

std::vector<uint64_t> EncodeFlags(const CycleFlags& mine, int slots);

// Reads the bitwise AND of every rank's EncodeFlags.
CycleFlags DecodeAgreedFlags(const std::vector<uint64_t>& all_anded, int slots);

}  // namespace tutti

#endif  // TUTTI_SRC_CYCLE_FLAGS_H_
