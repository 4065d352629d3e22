// What each rank contributes to the one bitwise AND that opens every negotiation cycle, and
// what the ranks agree on from its result. "All ranks" facts (cache slot i is ready
// everywhere) are plain bits; "any rank" facts (someone needs a full negotiation, wants slot
// i invalidated, ...) are stored inverted, because NOT(AND(NOT x)) is OR(x).
#ifndef TUTTI_SRC_CYCLE_FLAGS_H_
#define TUTTI_SRC_CYCLE_FLAGS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tutti {

struct CycleFlags {
  // Any-rank facts.
  bool negotiate = false;  // requests (or announcements) for the coordinator
  bool shutdown = false;   // asks the job to stop
  bool joined = false;     // has joined: the cache path is off until the join completes
  bool busy = false;       // requests in flight (keeps the others cycling promptly)
  std::vector<bool> invalidate;  // per cache slot
  // All-rank facts.
  std::vector<bool> ready;  // per cache slot
};

// Words for `slots` cache slots: one header word, then the ready and invalidate bitmaps.
size_t FlagWords(int slots);

std::vector<uint64_t> EncodeFlags(const CycleFlags& mine, int slots);

// Reads the bitwise AND of every rank's EncodeFlags.
CycleFlags DecodeAgreedFlags(const std::vector<uint64_t>& all_anded, int slots);

}  // namespace tutti

#endif  // TUTTI_SRC_CYCLE_FLAGS_H_
