#include "output_pool.h"

#include <utility>

namespace tutti_torch {

OutputPool& OutputPool::Instance() {
  static OutputPool* pool = new OutputPool();  // intentionally leaked, see header
  return *pool;
}

bool OutputPool::Free(const at::Tensor& block) {
  // The pool's tensor is the only holder of itself and of its storage: no view, no Python
  // object, no other request refers to it.
  return block.use_count() == 1 && block.storage().use_count() == 1;
}

at::Tensor OutputPool::Take(at::ScalarType dtype, int64_t numel, const at::Device& device) {
  const auto options = at::TensorOptions().dtype(dtype).device(device);
  const size_t bytes = static_cast<size_t>(numel) * at::elementSize(dtype);
  if (!device.is_cpu() || bytes < kMinBytes || bytes > kMaxBlockBytes) {
    return at::empty({numel}, options);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
    if (it->scalar_type() == dtype && it->numel() == numel && Free(*it)) {
      at::Tensor block = std::move(*it);
      blocks_.erase(it);
      blocks_.push_back(block);
      return block;
    }
  }
  at::Tensor block = at::empty({numel}, options);
  blocks_.push_back(block);
  bytes_ += bytes;
  while (bytes_ > kMaxPoolBytes) {  // forget the oldest; a block in use stays with its user
    bytes_ -= blocks_.front().nbytes();
    blocks_.pop_front();
  }
  return block;
}

}  // namespace tutti_torch
