#include "handle_table.h"

#include <chrono>
#include <stdexcept>

namespace tutti_torch {

HandleTable& HandleTable::Instance() {
  static HandleTable* table = new HandleTable();  // intentionally leaked, see header
  return *table;
}

int64_t HandleTable::Add(std::shared_ptr<void> keepalive, std::function<void()> on_success) {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t handle = next_handle_++;
  Entry& entry = entries_[handle];
  entry.outcome.keepalive = std::move(keepalive);
  entry.outcome.on_success = std::move(on_success);
  return handle;
}

void HandleTable::Discard(int64_t handle) {
  Outcome dropped;  // released after the lock, on this thread
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(handle);
  if (it != entries_.end()) {
    dropped = std::move(it->second.outcome);
    entries_.erase(it);
  }
}

void* HandleTable::UserData(int64_t handle) {
  return reinterpret_cast<void*>(static_cast<intptr_t>(handle));
}

void HandleTable::OnDone(void* user_data, tutti_status status, const char* message) {
  Instance().Complete(static_cast<int64_t>(reinterpret_cast<intptr_t>(user_data)), status,
                      message);
}

void HandleTable::Complete(int64_t handle, tutti_status status, const char* message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(handle);
    if (it == entries_.end()) return;  // discarded after a failed enqueue
    it->second.done = true;
    it->second.outcome.status = status;
    if (status != TUTTI_OK) {
      it->second.outcome.message =
          message != nullptr && *message != '\0' ? message : "the tutti core reported a failure";
    }
  }
  completed_.notify_all();
}

std::unordered_map<int64_t, HandleTable::Entry>::iterator HandleTable::Find(int64_t handle) {
  auto it = entries_.find(handle);
  if (it == entries_.end()) {
    throw std::out_of_range("unknown tutti handle " + std::to_string(handle) +
                            ": it was never returned by an *_async call, or it was "
                            "already synchronized");
  }
  return it;
}

bool HandleTable::Poll(int64_t handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  return Find(handle)->second.done;
}

bool HandleTable::Wait(int64_t handle, double timeout_seconds, Outcome* outcome) {
  std::unique_lock<std::mutex> lock(mutex_);
  Find(handle);
  // A handle removed meanwhile (another thread synchronized it) also ends the wait.
  auto is_done = [&] {
    auto it = entries_.find(handle);
    return it == entries_.end() || it->second.done;
  };
  if (timeout_seconds < 0) {
    completed_.wait(lock, is_done);
  } else if (!completed_.wait_for(lock, std::chrono::duration<double>(timeout_seconds),
                                  is_done)) {
    return false;
  }
  auto it = Find(handle);
  *outcome = std::move(it->second.outcome);
  entries_.erase(it);
  return true;
}

}  // namespace tutti_torch
