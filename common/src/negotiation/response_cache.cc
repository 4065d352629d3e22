#include "negotiation/response_cache.h"

namespace tutti {

bool SameRequest(const RequestMeta& a, const RequestMeta& b) {
  return a.name == b.name && a.collective == b.collective && a.process_set == b.process_set &&
         a.reduce_op == b.reduce_op && a.dtype == b.dtype && a.shapes == b.shapes &&
         a.prescale == b.prescale && a.postscale == b.postscale && a.root_rank == b.root_rank &&
         a.device == b.device &&
         a.splits == b.splits;
}

ResponseCache::ResponseCache(int capacity)
    : entries_(capacity > 0 ? capacity : 0), occupied_(capacity > 0 ? capacity : 0) {}

bool ResponseCache::Cacheable(const Response& response) {
  if (response.kind != Response::Kind::kExecute || response.names.size() != 1) return false;
  if (!response.joined_ranks.empty()) return false;
  switch (response.collective) {
    case Collective::kAllreduce:
    case Collective::kAllgather:
    case Collective::kBroadcast:
    case Collective::kAlltoall:
    case Collective::kReducescatter:
      return true;
    default:
      return false;  // barriers, joins and process-set changes are one-offs
  }
}

ResponseCache::Lookup ResponseCache::Find(const RequestMeta& mine, int* slot) const {
  auto it = by_name_.find(mine.name);
  if (it == by_name_.end()) return Lookup::kMiss;
  *slot = it->second;
  const Entry& entry = entries_[it->second];
  return entry.member && SameRequest(entry.mine, mine) ? Lookup::kHit : Lookup::kChanged;
}

void ResponseCache::Put(const Response& response, const RequestMeta* mine, int* evicted) {
  *evicted = -1;
  if (entries_.empty() || !Cacheable(response)) return;
  const std::string& name = response.names[0];
  int slot = -1;
  auto it = by_name_.find(name);
  if (it != by_name_.end()) {
    slot = it->second;
  } else {
    // The lowest free slot, else the least recently used one; the same on every rank.
    for (int i = 0; i < capacity() && slot < 0; ++i) {
      if (!entries_[i].occupied) slot = i;
    }
    if (slot < 0) {
      slot = 0;
      for (int i = 1; i < capacity(); ++i) {
        if (entries_[i].last_used < entries_[slot].last_used) slot = i;
      }
      by_name_.erase(entries_[slot].response.names[0]);
      *evicted = slot;
    }
    by_name_[name] = slot;
  }
  Entry& entry = entries_[slot];
  entry.occupied = true;
  occupied_.Set(slot);
  entry.member = mine != nullptr;
  entry.mine = mine != nullptr ? *mine : RequestMeta();
  entry.response = response;
  entry.last_used = ++clock_;
}

void ResponseCache::Touch(int slot) { entries_[slot].last_used = ++clock_; }

void ResponseCache::Erase(int slot) {
  Entry& entry = entries_[slot];
  if (!entry.occupied) return;
  by_name_.erase(entry.response.names[0]);
  entry = Entry();
  occupied_.Reset(slot);
}

std::vector<int> ResponseCache::SlotsOfSet(int32_t set) const {
  std::vector<int> slots;
  for (int i = 0; i < capacity(); ++i) {
    if (entries_[i].occupied && entries_[i].response.process_set == set) slots.push_back(i);
  }
  return slots;
}

void ResponseCache::Clear() {
  for (Entry& entry : entries_) entry = Entry();
  by_name_.clear();
  occupied_.Clear();
}

}  // namespace tutti
