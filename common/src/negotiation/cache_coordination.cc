#include "negotiation/cache_coordination.h"

#include <utility>

namespace tutti {

constexpr std::chrono::seconds CacheCoordination::kStaleWait;

CacheCoordination::CacheCoordination(int capacity, Counters* counters)
    : cache_(capacity), counters_(counters), enabled_(capacity > 0) {}

void CacheCoordination::Sort(RequestMeta meta, Clock::time_point now, SlotBits* invalidate) {
  int slot = -1;
  ResponseCache::Lookup found =
      enabled_ ? cache_.Find(meta, &slot) : ResponseCache::Lookup::kMiss;
  if (found == ResponseCache::Lookup::kHit) {
    counters_->Add(kCacheHits);
    waits_[slot] = Wait{std::move(meta), now};
    return;
  }
  if (found == ResponseCache::Lookup::kChanged) invalidate->Set(slot);
  counters_->Add(kCacheMisses);
  unsent_.push_back(std::move(meta));
}

void CacheCoordination::Contribute(Clock::time_point now, SlotBits invalidate,
                                   CycleFlags* mine) const {
  for (const auto& item : waits_) {
    if (now - item.second.since > kStaleWait) invalidate.Set(item.first);
  }
  mine->invalidate = std::move(invalidate);
  mine->ready = SlotBits(cache_.capacity());
  if (enabled_) {
    cache_.occupied().ForEach([&](int slot) {
      // Ranks outside the entry's process set never submit it: they agree by default.
      if (!cache_.Member(slot) || waits_.count(slot) > 0) mine->ready.Set(slot);
    });
  }
}

void CacheCoordination::Demote(int slot) {
  auto it = waits_.find(slot);
  if (it == waits_.end()) return;
  unsent_.push_back(std::move(it->second.meta));
  waits_.erase(it);
}

void CacheCoordination::ApplyAgreed(const CycleFlags& agreed, std::vector<int>* ready_slots) {
  agreed.invalidate.ForEach([&](int slot) {
    if (cache_.Occupied(slot)) counters_->Add(kCacheInvalidations);
    cache_.Erase(slot);
    Demote(slot);
  });
  agreed.ready.ForEach([&](int slot) {
    if (agreed.invalidate.Test(slot) || !cache_.Occupied(slot)) return;
    ready_slots->push_back(slot);
    waits_.erase(slot);
  });
  if (agreed.joined) {
    while (!waits_.empty()) Demote(waits_.begin()->first);
  }
}

std::vector<RequestMeta> CacheCoordination::TakeUnsent() {
  std::vector<RequestMeta> taken = std::move(unsent_);
  unsent_.clear();
  return taken;
}

void CacheCoordination::Ran(int slot) {
  if (enabled_) cache_.Touch(slot);
}

void CacheCoordination::Remember(const Response& response, const RequestMeta* mine) {
  if (!enabled_) return;
  int evicted = -1;
  cache_.Put(response, mine, &evicted);
  if (evicted >= 0) Demote(evicted);
}

void CacheCoordination::ForgetRemovedSets(const ProcessSetRegistry& sets) {
  // Looking up every entry's set takes the registry's lock once per entry, every cycle;
  // a job that never removed a set (ids are never reused) has nothing to find.
  if (sets.removals() == 0) return;
  std::vector<int> gone;
  cache_.occupied().ForEach([&](int slot) {
    if (sets.Size(cache_.response(slot).process_set) < 0) gone.push_back(slot);
  });
  for (int slot : gone) {
    cache_.Erase(slot);
    Demote(slot);
  }
}

void CacheCoordination::SetEnabled(bool enabled) {
  if (enabled_ && !enabled) {
    // Every rank switches at the same cycle; waiting hits go to the coordinator.
    cache_.Clear();
    while (!waits_.empty()) Demote(waits_.begin()->first);
  }
  enabled_ = enabled;
}

}  // namespace tutti
