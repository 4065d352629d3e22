#include "request_table.h"

#include <chrono>
#include <string>
#include <utility>

#include "output_pool.h"
#include "request_support.h"

namespace tutti_torch {

void Request::OnDone(void* user_data, tutti_status status, const char* message) {
  auto* request = static_cast<Request*>(user_data);
  {
    std::lock_guard<std::mutex> lock(request->mutex_);
    request->status = status;
    if (status != TUTTI_OK) {
      request->error = message != nullptr && *message != '\0'
                           ? message
                           : "the tutti core reported a failure";
    }
    request->done_.store(true, std::memory_order_release);
    // Under the lock: the thread that collects the request destroys it once done, and
    // takes the lock first (Finished, Wait), so it cannot free the condition variable
    // while this call still uses it. No system call when nobody waits.
    request->completed_.notify_all();
  }
}

bool Request::Finished() {
  if (!done()) return false;
  std::lock_guard<std::mutex> lock(mutex_);  // waits out an OnDone still notifying
  return true;
}

bool Request::Wait(double timeout_seconds) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto is_done = [this] { return done(); };
  if (timeout_seconds < 0) {
    completed_.wait(lock, is_done);
    return true;
  }
  return completed_.wait_for(lock, std::chrono::duration<double>(timeout_seconds), is_done);
}

// Outputs whose shape is known only after negotiation: a contiguous tensor of the request's
// dtype on its device, from the output pool (reused storage for large CPU outputs).
// Zero-element outputs get one element of storage so that the core never sees a NULL
// buffer.
void* Request::Allocate(void* user_data, int32_t index, int32_t ndim, const int64_t* shape) {
  auto* request = static_cast<Request*>(user_data);
  if (index < 0) return nullptr;
  try {
    std::vector<int64_t> sizes(shape, shape + ndim);
    int64_t numel = 1;
    for (int64_t size : sizes) numel *= size;
    at::Tensor buffer = OutputPool::Instance().Take(request->dtype, numel > 0 ? numel : 1,
                                                    request->device->device());
    if (request->outputs.size() <= static_cast<size_t>(index)) {
      request->outputs.resize(index + 1);
      request->allocation_buffers.resize(index + 1);
    }
    request->outputs[index] = buffer.narrow(0, 0, numel).view(sizes);
    request->allocation_buffers[index] = buffer;
    return buffer.data_ptr();
  } catch (...) {
    return nullptr;  // the core fails the request
  }
}

RequestTable& RequestTable::Instance() {
  static RequestTable* table = new RequestTable();  // intentionally leaked, see header
  return *table;
}

int64_t RequestTable::Add(std::shared_ptr<Request> request) {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t handle = next_handle_++;
  requests_.emplace(handle, std::move(request));
  return handle;
}

namespace {

[[noreturn]] void Unknown(int64_t handle) {
  Fail(TUTTI_ERR_INVALID_ARGUMENT,
       "unknown tutti handle " + std::to_string(handle) +
           ": it was never returned by an *_async call, or it was already synchronized");
}

}  // namespace

std::shared_ptr<Request> RequestTable::Find(int64_t handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = requests_.find(handle);
  if (it == requests_.end()) Unknown(handle);
  return it->second;
}

std::shared_ptr<Request> RequestTable::Take(int64_t handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = requests_.find(handle);
  if (it == requests_.end()) Unknown(handle);
  std::shared_ptr<Request> request = std::move(it->second);
  requests_.erase(it);
  return request;
}

}  // namespace tutti_torch
