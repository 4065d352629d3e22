// A Chrome trace (JSON array format, opens in Perfetto or chrome://tracing) of what the core
// does with each tensor: negotiation, waiting for its turn, fusion copies and the collective.
// One row per tensor name. The file is valid JSON after every write: each flush rewrites the
// closing bracket with a single pwrite, so a killed job leaves a readable trace (missing at
// most the last flush interval).
#ifndef TUTTI_SRC_TIMELINE_H_
#define TUTTI_SRC_TIMELINE_H_

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <unordered_map>

#include "base/status.h"

namespace tutti {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Timeline(int rank) : rank_(rank) {}
  ~Timeline() { Stop(); }

  // Starts writing to `path` (truncated); replaces a trace already being written.
  Status Start(const std::string& path);
  // Flushes and closes the file. Idempotent.
  void Stop();
  bool active() const { return active_.load(std::memory_order_relaxed); }

  // Records that `tensor` spent [start, end] in activity `what`; `args` is a JSON object body
  // ("\"bytes\": 4") or empty.
  void Span(const std::string& tensor, const char* what, Clock::time_point start,
            Clock::time_point end, const std::string& args = "");
  // Writes buffered events when the last write is older than the flush interval (or always
  // with force).
  void Flush(bool force = false);

 private:
  void FlushLocked();
  int RowLocked(const std::string& tensor);

  const int rank_;
  std::atomic<bool> active_{false};
  std::mutex mutex_;
  int fd_ = -1;
  long offset_ = 0;  // where the closing bracket starts
  bool empty_ = true;
  std::string pending_;
  std::unordered_map<std::string, int> rows_;
  Clock::time_point origin_;
  Clock::time_point last_flush_;
};

}  // namespace tutti

#endif  // TUTTI_SRC_TIMELINE_H_
