// The process sets known to this rank: id -> sorted global ranks. Set 0 is the global set.
// Every rank applies additions and removals in the negotiated order, so ids agree everywhere.
// Read from any thread (enqueue-time validation, the C ABI queries); changed only by the
// background thread.
#ifndef TUTTI_SRC_PROCESS_SETS_H_
#define TUTTI_SRC_PROCESS_SETS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "base/status.h"

namespace tutti {

class ProcessSetRegistry {
 public:
  // The global set {0, ..., size - 1} gets id 0.
  explicit ProcessSetRegistry(int size);

  // Checks that `ranks` is a valid new set for a job of `size` ranks: not empty, sorted,
  // distinct, in range.
  static Status Validate(const std::vector<int32_t>& ranks, int size);

  // Registers a set under the next id (ids are never reused) and returns the id.
  int32_t Add(const std::vector<int32_t>& ranks);
  // False when `id` is unknown or the global set.
  bool Remove(int32_t id);

  // False for an unknown id.
  bool Members(int32_t id, std::vector<int32_t>* ranks) const;
  // Rank of `global_rank` within set `id`; -1 when not a member or the id is unknown.
  int RankIn(int32_t id, int global_rank) const;
  // Size of set `id`, or -1 when unknown.
  int Size(int32_t id) const;
  // How many sets were removed so far (without the lock).
  uint64_t removals() const { return removals_.load(std::memory_order_acquire); }

 private:
  mutable std::mutex mutex_;
  std::atomic<uint64_t> removals_{0};
  std::map<int32_t, std::vector<int32_t>> sets_;
  int32_t next_id_ = 1;
};

}  // namespace tutti

#endif  // TUTTI_SRC_PROCESS_SETS_H_
