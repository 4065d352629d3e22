// The response cache's part of every cycle: which new requests are cache hits that wait for
// the other ranks, the cache bits this rank contributes to the cycle's flags, and what the
// agreed flags do to the cache. Every rank applies the same agreed facts and the same
// executed responses in the same order, so the caches stay identical (response_cache.h).
// Requests the cache cannot serve collect here for the coordinator's next negotiation.
// Background thread only.
#ifndef TUTTI_SRC_NEGOTIATION_CACHE_COORDINATION_H_
#define TUTTI_SRC_NEGOTIATION_CACHE_COORDINATION_H_

#include <chrono>
#include <map>
#include <vector>

#include "base/counters.h"
#include "negotiation/cycle_flags.h"
#include "negotiation/response_cache.h"
#include "requests/process_sets.h"
#include "requests/request.h"

namespace tutti {

class CacheCoordination {
 public:
  using Clock = std::chrono::steady_clock;

  // A cache hit still waiting for other ranks after this long is sent to the coordinator
  // instead (every rank drops the entry), so the stall inspector sees it.
  static constexpr std::chrono::seconds kStaleWait{1};

  // `capacity` 0 disables the cache. `counters` must outlive this.
  CacheCoordination(int capacity, Counters* counters);

  int capacity() const { return cache_.capacity(); }
  // Slots up to the last occupied one (the same on every rank): the flags need no more.
  int used_slots() const { return cache_.occupied().UsedSlots(); }
  bool enabled() const { return enabled_; }

  // Sorts a new request: a hit waits for the other ranks; a miss goes to the coordinator
  // (a changed entry is also marked in *invalidate).
  void Sort(RequestMeta meta, Clock::time_point now, SlotBits* invalidate);
  // This rank's cache bits: slots it has ready (or is not a member of), and slots to
  // invalidate (`invalidate` plus waits older than kStaleWait).
  void Contribute(Clock::time_point now, SlotBits invalidate, CycleFlags* mine) const;
  // Applies the agreed flags: drops invalidated entries (their waits go to the coordinator),
  // collects the slots of the responses every rank has ready, and while a rank is joined
  // sends every wait to the coordinator (it stands in for the joined rank).
  void ApplyAgreed(const CycleFlags& agreed, std::vector<int>* ready_slots);
  // The cached response of an occupied slot. The reference stays valid, but the slot may
  // hold another response after the next Remember, ForgetRemovedSets or SetEnabled: a
  // cycle reads its ready responses in place (no copy per request) before updating the cache.
  const Response& response(int slot) const { return cache_.response(slot); }

  // The requests for the coordinator's next negotiation, handed over once.
  bool has_unsent() const { return !unsent_.empty(); }
  std::vector<RequestMeta> TakeUnsent();

  // After execution, in the agreed order: a cached response ran again (`slot`), or a
  // negotiated one is remembered with this rank's request for it (null if it had none).
  void Ran(int slot);
  void Remember(const Response& response, const RequestMeta* mine);
  // Drops the entries of process sets that no longer exist.
  void ForgetRemovedSets(const ProcessSetRegistry& sets);
  // Turns the cache on or off (all ranks at the same cycle); off empties it.
  void SetEnabled(bool enabled);

 private:
  // A request that hit the cache and waits for the other ranks' bits.
  struct Wait {
    RequestMeta meta;
    Clock::time_point since;
  };

  // Sends the wait of `slot` (if any) to the coordinator.
  void Demote(int slot);

  ResponseCache cache_;
  Counters* counters_;
  bool enabled_;
  std::map<int, Wait> waits_;  // by cache slot
  std::vector<RequestMeta> unsent_;
};

}  // namespace tutti

#endif  // TUTTI_SRC_NEGOTIATION_CACHE_COORDINATION_H_
