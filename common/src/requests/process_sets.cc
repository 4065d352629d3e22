#include "requests/process_sets.h"

#include <algorithm>
#include <string>

#include "tutti/c_api.h"

namespace tutti {

ProcessSetRegistry::ProcessSetRegistry(int size) {
  std::vector<int32_t> all(size);
  for (int r = 0; r < size; ++r) all[r] = r;
  sets_[TUTTI_GLOBAL_PROCESS_SET] = all;
}

Status ProcessSetRegistry::Validate(const std::vector<int32_t>& ranks, int size) {
  if (ranks.empty()) return Status::InvalidArgument("a process set needs at least one rank");
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size) {
      return Status::InvalidArgument("process set rank " + std::to_string(ranks[i]) +
                                     " is out of range for a job of " + std::to_string(size) +
                                     " ranks");
    }
    if (i > 0 && ranks[i] <= ranks[i - 1]) {
      return Status::InvalidArgument("process set ranks must be sorted and distinct");
    }
  }
  return Status::OK();
}

int32_t ProcessSetRegistry::Add(const std::vector<int32_t>& ranks) {
  std::lock_guard<std::mutex> lock(mutex_);
  int32_t id = next_id_++;
  sets_[id] = ranks;
  return id;
}

bool ProcessSetRegistry::Remove(int32_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (id == TUTTI_GLOBAL_PROCESS_SET || sets_.erase(id) != 1) return false;
  removals_.fetch_add(1, std::memory_order_release);
  return true;
}

bool ProcessSetRegistry::Members(int32_t id, std::vector<int32_t>* ranks) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sets_.find(id);
  if (it == sets_.end()) return false;
  *ranks = it->second;
  return true;
}

int ProcessSetRegistry::RankIn(int32_t id, int global_rank) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sets_.find(id);
  if (it == sets_.end()) return -1;
  auto pos = std::lower_bound(it->second.begin(), it->second.end(), global_rank);
  if (pos == it->second.end() || *pos != global_rank) return -1;
  return static_cast<int>(pos - it->second.begin());
}

int ProcessSetRegistry::Size(int32_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sets_.find(id);
  return it == sets_.end() ? -1 : static_cast<int>(it->second.size());
}

}  // namespace tutti
