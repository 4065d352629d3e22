// The response cache: negotiated requests remembered by name, so that later steps with the
// same tensors skip the coordinator. Every rank holds an identical cache because every rank
// applies the same updates (Put, Touch, Erase) in the same negotiated order; an entry is
// therefore named by its slot index, and a cycle only needs one bitwise AND of "slot i is
// ready here" bits to agree on what to run.
#ifndef TUTTI_SRC_RESPONSE_CACHE_H_
#define TUTTI_SRC_RESPONSE_CACHE_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "negotiation/cycle_flags.h"
#include "requests/request.h"

namespace tutti {

class ResponseCache {
 public:
  explicit ResponseCache(int capacity);

  enum class Lookup { kMiss, kHit, kChanged };
  // Whether this rank's request matches the entry of its name (kHit), the name is cached
  // with other metadata (kChanged: the entry must be invalidated), or is unknown. *slot is
  // set for kHit and kChanged.
  Lookup Find(const RequestMeta& mine, int* slot) const;

  // Remembers an executed response under its (single) name, with this rank's request for it
  // (`mine` is null on ranks outside the response's process set). May evict the least
  // recently used entry; its slot is returned in *evicted (-1 if none).
  void Put(const Response& response, const RequestMeta* mine, int* evicted);
  // Marks a slot used (it ran again), for the least-recently-used order.
  void Touch(int slot);
  void Erase(int slot);
  // Slots of every entry on process set `set` (for removing the set).
  std::vector<int> SlotsOfSet(int32_t set) const;
  void Clear();

  bool Occupied(int slot) const { return entries_[slot].occupied; }
  // The occupied slots, for visiting only those.
  const SlotBits& occupied() const { return occupied_; }
  const Response& response(int slot) const { return entries_[slot].response; }
  // Whether this rank took part in the cached response (it is in the response's set).
  bool Member(int slot) const { return entries_[slot].member; }
  int capacity() const { return static_cast<int>(entries_.size()); }
  int size() const { return static_cast<int>(by_name_.size()); }

  // Whether a response can be cached at all.
  static bool Cacheable(const Response& response);

 private:
  struct Entry {
    bool occupied = false;
    bool member = false;
    RequestMeta mine;
    Response response;
    uint64_t last_used = 0;
  };
  std::vector<Entry> entries_;
  SlotBits occupied_;
  std::unordered_map<std::string, int> by_name_;
  uint64_t clock_ = 0;
};

// Whether two requests from the same rank would negotiate to the same response.
bool SameRequest(const RequestMeta& a, const RequestMeta& b);

}  // namespace tutti

#endif  // TUTTI_SRC_RESPONSE_CACHE_H_
