#include "requests/request_queue.h"

#include <algorithm>

namespace tutti {

RequestQueue::Map::node_type RequestQueue::SpareNode(PendingOp* old) {
  Map::node_type node;
  if (!holding_executed_.empty()) {
    node = std::move(holding_executed_.back());
    holding_executed_.pop_back();
    *old = std::move(node.mapped().op);
  } else if (!emptied_.empty()) {
    node = std::move(emptied_.back());
    emptied_.pop_back();
  }
  return node;
}

namespace {

// InvalidArgument, as Horovod reports a duplicate name (a ValueError in Python).
Status Duplicate(const std::string& name) {
  return Status::InvalidArgument("a request named '" + name +
                                 "' is already in flight; names must be unique among pending "
                                 "requests (wait for the first one before resubmitting)");
}

}  // namespace

Status RequestQueue::Enqueue(PendingOp op) {
  PendingOp old;  // an executed request whose node this one reuses: freed after the lock
  std::lock_guard<AdaptiveMutex> lock(mutex_);
  if (closed_) return close_reason_;
  Map::node_type node = SpareNode(&old);
  Entry* entry;
  if (node.empty()) {
    auto inserted = in_flight_.try_emplace(op.meta.name);
    if (!inserted.second) return Duplicate(op.meta.name);
    entry = &inserted.first->second;
  } else {
    node.key() = op.meta.name;  // reuses the string's capacity
    auto inserted = in_flight_.insert(std::move(node));
    if (!inserted.inserted) {
      emptied_.push_back(std::move(inserted.node));
      return Duplicate(op.meta.name);
    }
    entry = &inserted.position->second;
  }
  entry->op = std::move(op);
  entry->is_new = true;
  new_.push_back(entry);
  return Status::OK();
}

std::vector<RequestMeta> RequestQueue::TakeNew() {
  std::lock_guard<AdaptiveMutex> lock(mutex_);
  std::vector<RequestMeta> result;
  result.reserve(new_.size());
  for (Entry* entry : new_) {
    result.push_back(entry->op.meta);
    entry->is_new = false;
  }
  new_.clear();
  return result;
}

bool RequestQueue::Take(const std::string& name, PendingOp* op) {
  std::lock_guard<AdaptiveMutex> lock(mutex_);
  return TakeLocked(name, op);
}

void RequestQueue::TakeAll(const std::vector<const std::string*>& names,
                           const std::vector<PendingOp*>& ops, std::vector<bool>* found) {
  // Bounded batches: a submitting thread waits no longer than a few dozen lookups.
  constexpr size_t kPerLock = 32;
  found->assign(names.size(), false);
  for (size_t begin = 0; begin < names.size(); begin += kPerLock) {
    const size_t end = std::min(names.size(), begin + kPerLock);
    std::lock_guard<AdaptiveMutex> lock(mutex_);
    for (size_t i = begin; i < end; ++i) (*found)[i] = TakeLocked(*names[i], ops[i]);
  }
}

bool RequestQueue::TakeLocked(const std::string& name, PendingOp* op) {
  auto it = in_flight_.find(name);
  if (it == in_flight_.end()) return false;
  // Answered before this rank sorted it (another rank's request of the same name, e.g. while
  // this rank was joined): it is no longer new.
  if (it->second.is_new) new_.erase(std::find(new_.begin(), new_.end(), &it->second));
  Map::node_type node = in_flight_.extract(it);
  *op = std::move(node.mapped().op);
  if (emptied_.size() + holding_executed_.size() < kMaxSpareNodes) {
    emptied_.push_back(std::move(node));
  }
  return true;
}

void RequestQueue::Recycle(std::vector<PendingOp>* executed) {
  // The lock is held only to move node handles (a pointer each): a submitting thread waits
  // for it between two requests.
  {
    std::lock_guard<AdaptiveMutex> lock(mutex_);
    const size_t n = std::min(emptied_.size(), executed->size());
    for (size_t i = 0; i < n; ++i) {
      recycling_.push_back(std::move(emptied_.back()));
      emptied_.pop_back();
    }
  }
  for (size_t i = 0; i < recycling_.size(); ++i) {
    recycling_[i].mapped().op = std::move((*executed)[i]);
  }
  executed->clear();  // those left over (no spare node) are freed here
  std::lock_guard<AdaptiveMutex> lock(mutex_);
  for (Map::node_type& node : recycling_) holding_executed_.push_back(std::move(node));
  recycling_.clear();
}

bool RequestQueue::Empty() {
  std::lock_guard<AdaptiveMutex> lock(mutex_);
  return in_flight_.empty();
}

bool RequestQueue::HasNew() {
  std::lock_guard<AdaptiveMutex> lock(mutex_);
  return !new_.empty();
}

bool RequestQueue::HasWaiting() {
  std::lock_guard<AdaptiveMutex> lock(mutex_);
  return in_flight_.size() > new_.size();  // every new entry is in flight
}

std::vector<PendingOp> RequestQueue::Close(const Status& reason) {
  std::lock_guard<AdaptiveMutex> lock(mutex_);
  closed_ = true;
  close_reason_ = reason;
  std::vector<PendingOp> result;
  for (auto& item : in_flight_) result.push_back(std::move(item.second.op));
  in_flight_.clear();
  new_.clear();
  return result;
}

}  // namespace tutti
