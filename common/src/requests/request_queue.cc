#include "requests/request_queue.h"

namespace tutti {

Status RequestQueue::Enqueue(PendingOp op) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return close_reason_;
  const std::string name = op.meta.name;
  if (in_flight_.count(name) != 0) {
    // InvalidArgument, as Horovod reports a duplicate name (a ValueError in Python).
    return Status::InvalidArgument("a request named '" + name +
                                   "' is already in flight; names must be unique among pending "
                                   "requests (wait for the first one before resubmitting)");
  }
  in_flight_.emplace(name, std::move(op));
  new_names_.push_back(name);
  return Status::OK();
}

std::vector<RequestMeta> RequestQueue::TakeNew() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<RequestMeta> result;
  result.reserve(new_names_.size());
  for (const std::string& name : new_names_) result.push_back(in_flight_.at(name).meta);
  new_names_.clear();
  return result;
}

bool RequestQueue::Take(const std::string& name, PendingOp* op) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_flight_.find(name);
  if (it == in_flight_.end()) return false;
  *op = std::move(it->second);
  in_flight_.erase(it);
  return true;
}

bool RequestQueue::Empty() {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_flight_.empty();
}

bool RequestQueue::HasNew() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !new_names_.empty();
}

bool RequestQueue::HasWaiting() {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_flight_.size() > new_names_.size();  // every new name is in flight
}

std::vector<PendingOp> RequestQueue::Close(const Status& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  close_reason_ = reason;
  std::vector<PendingOp> result;
  for (auto& item : in_flight_) result.push_back(std::move(item.second));
  in_flight_.clear();
  new_names_.clear();
  return result;
}

}  // namespace tutti
