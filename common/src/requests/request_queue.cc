#include "requests/request_queue.h"

#include <algorithm>

namespace tutti {

Status RequestQueue::Enqueue(PendingOp op) {
  std::lock_guard<AdaptiveMutex> lock(mutex_);
  if (closed_) return close_reason_;
  auto inserted = in_flight_.try_emplace(op.meta.name);
  if (!inserted.second) {
    // InvalidArgument, as Horovod reports a duplicate name (a ValueError in Python).
    return Status::InvalidArgument("a request named '" + op.meta.name +
                                   "' is already in flight; names must be unique among pending "
                                   "requests (wait for the first one before resubmitting)");
  }
  Entry& entry = inserted.first->second;
  entry.op = std::move(op);
  new_.push_back(&entry);
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
  auto it = in_flight_.find(name);
  if (it == in_flight_.end()) return false;
  // Answered before this rank sorted it (another rank's request of the same name, e.g. while
  // this rank was joined): it is no longer new.
  if (it->second.is_new) new_.erase(std::find(new_.begin(), new_.end(), &it->second));
  *op = std::move(it->second.op);
  in_flight_.erase(it);
  return true;
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
