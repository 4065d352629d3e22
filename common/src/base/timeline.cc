#include "base/timeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tutti {
namespace {

const char kClosing[] = "\n]\n";
const auto kFlushInterval = std::chrono::milliseconds(100);

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

bool WriteAll(int fd, const std::string& bytes, long offset) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = pwrite(fd, bytes.data() + done, bytes.size() - done, offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Status Timeline::Start(const std::string& path) {
  Stop();
  std::lock_guard<std::mutex> lock(mutex_);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::InvalidArgument("cannot write the timeline file '" + path +
                                   "': " + std::strerror(errno));
  }
  fd_ = fd;
  offset_ = 1;  // after "["
  empty_ = true;
  rows_.clear();
  pending_.clear();
  origin_ = last_flush_ = Clock::now();
  if (!WriteAll(fd_, std::string("[") + kClosing, 0)) {
    close(fd_);
    fd_ = -1;
    return Status::InvalidArgument("cannot write the timeline file '" + path + "'");
  }
  active_.store(true);
  return Status::OK();
}

void Timeline::Stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0) return;
  active_.store(false);
  FlushLocked();
  close(fd_);
  fd_ = -1;
}

int Timeline::RowLocked(const std::string& tensor) {
  auto it = rows_.find(tensor);
  if (it != rows_.end()) return it->second;
  const int row = static_cast<int>(rows_.size()) + 1;
  rows_[tensor] = row;
  // Names the row after the tensor.
  pending_ += std::string(empty_ ? "\n" : ",\n") + "{\"name\": \"thread_name\", \"ph\": \"M\", " +
              "\"pid\": " + std::to_string(rank_) + ", \"tid\": " + std::to_string(row) +
              ", \"args\": {\"name\": " + JsonString(tensor) + "}}";
  empty_ = false;
  return row;
}

void Timeline::Span(const std::string& tensor, const char* what, Clock::time_point start,
                    Clock::time_point end, const std::string& args) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0) return;
  const int row = RowLocked(tensor);
  using Micros = std::chrono::duration<double, std::micro>;
  char times[96];
  std::snprintf(times, sizeof(times), "\"ts\": %.3f, \"dur\": %.3f",
                Micros(start - origin_).count(), Micros(end - start).count());
  pending_ += std::string(",\n{\"name\": \"") + what + "\", \"ph\": \"X\", " + times +
              ", \"pid\": " + std::to_string(rank_) + ", \"tid\": " + std::to_string(row) +
              ", \"args\": {" + args + "}}";
}

void Timeline::Flush(bool force) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0 || pending_.empty()) return;
  if (!force && Clock::now() - last_flush_ < kFlushInterval) return;
  FlushLocked();
}

void Timeline::FlushLocked() {
  last_flush_ = Clock::now();
  if (pending_.empty()) return;
  // Events and the closing bracket in one write: the file is valid JSON before and after.
  if (WriteAll(fd_, pending_ + kClosing, offset_)) offset_ += static_cast<long>(pending_.size());
  pending_.clear();
}

}  // namespace tutti
