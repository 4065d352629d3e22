// What the NCCL and the staged path share about a batch of device requests: their tensors as
// flat lists, the stream ordering around them (ready events in, done events out), and the
// grow-only buffers each path keeps (pinned staging buffers, device fusion buffers).
#ifndef TUTTI_SRC_GPU_DEVICE_REQUESTS_H_
#define TUTTI_SRC_GPU_DEVICE_REQUESTS_H_

#include <cstddef>
#include <functional>
#include <map>
#include <vector>

#include "base/status.h"
#include "gpu/device_runtime.h"
#include "requests/request_queue.h"

namespace tutti {
namespace gpu {

// Every tensor of `ops`, in request order: its input, its given output (null where the core
// allocates it) and its size in bytes.
struct FlatTensors {
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  std::vector<size_t> bytes;
};
FlatTensors Flatten(const std::vector<const PendingOp*>& ops);

// Makes `stream` wait for each request's ready event.
Status WaitForInputs(DeviceRuntime* runtime, void* stream,
                     const std::vector<const PendingOp*>& ops);

// Records each request's done event on `stream`, or blocks until the stream is done when one
// of them has none (then its outputs are complete when `done` runs).
Status FinishOnStream(DeviceRuntime* runtime, void* stream,
                      const std::vector<const PendingOp*>& ops);

// Grow-only buffers, one per key: a buffer is reused while it is big enough and replaced by
// one of the requested size when not.
template <typename Key>
class BufferCache {
 public:
  using Allocate = std::function<Status(const Key& key, size_t bytes, void** data)>;
  using Release = std::function<void(void* data)>;

  BufferCache(Allocate allocate, Release release)
      : allocate_(std::move(allocate)), release_(std::move(release)) {}
  ~BufferCache() {
    for (auto& entry : buffers_) release_(entry.second.data);
  }
  BufferCache(const BufferCache&) = delete;
  BufferCache& operator=(const BufferCache&) = delete;

  // The buffer of `key`, at least `bytes` long; null with *status set when allocation fails.
  // `retire` runs before a buffer is replaced (e.g. waits for work that still reads it).
  char* Get(const Key& key, size_t bytes, Status* status,
            const std::function<Status()>& retire = nullptr) {
    Buffer& buffer = buffers_[key];
    if (buffer.bytes < bytes || buffer.data == nullptr) {
      if (retire) {
        *status = retire();
        if (!status->ok()) return nullptr;
      }
      release_(buffer.data);
      buffer = Buffer();
      void* data = nullptr;
      *status = allocate_(key, bytes, &data);
      if (!status->ok()) return nullptr;
      buffer.data = data;
      buffer.bytes = bytes;
    }
    return static_cast<char*>(buffer.data);
  }

 private:
  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
  };
  Allocate allocate_;
  Release release_;
  std::map<Key, Buffer> buffers_;
};

}  // namespace gpu
}  // namespace tutti

#endif  // TUTTI_SRC_GPU_DEVICE_REQUESTS_H_
