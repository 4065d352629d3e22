#include "transport/store_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace tutti {
namespace {

const uint8_t kOpSet = 1;
const uint8_t kOpGet = 2;
const uint8_t kStatusOk = 0;
const uint8_t kStatusNotFound = 1;
const uint8_t kStatusUnauthorized = 2;
const uint8_t kStatusBadRequest = 3;

// A real store never sends a value larger than it accepts (store.py's MAX_VALUE_BYTES).
const uint32_t kMaxReplyBytes = uint32_t(1) << 30;
// A reply's value is read in steps of at most this much, so a bogus length from a service
// that is not a store never allocates more than what actually arrived.
const size_t kReplyStep = size_t(1) << 20;

using Clock = std::chrono::steady_clock;

void AppendU32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

void AppendField(std::string* out, const std::string& field) {
  AppendU32(out, static_cast<uint32_t>(field.size()));
  out->append(field);
}

// Waits until fd is ready for `events` or the deadline passes.
bool PollUntil(int fd, short events, Clock::time_point deadline) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p = {fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(left.count()));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return false;
  }
}

bool SendAll(int fd, const char* data, size_t size, Clock::time_point deadline) {
  while (size > 0) {
    if (!PollUntil(fd, POLLOUT, deadline)) return false;
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool RecvAll(int fd, char* data, size_t size, Clock::time_point deadline) {
  while (size > 0) {
    if (!PollUntil(fd, POLLIN, deadline)) return false;
    ssize_t n = ::recv(fd, data, size, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Connects one socket to `a` before the deadline (a non-blocking connect, so a host that
// drops packets costs the timeout, not the kernel's minutes of SYN retries).
int ConnectBefore(const addrinfo* a, Clock::time_point deadline, std::string* error) {
  int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
  if (fd < 0) {
    *error = std::strerror(errno);
    return -1;
  }
  int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
  if (rc != 0 && errno == EINPROGRESS) {
    if (!PollUntil(fd, POLLOUT, deadline)) {
      *error = "no answer (timed out)";
      ::close(fd);
      return -1;
    }
    int so_error = 0;
    socklen_t length = sizeof(so_error);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &length);
    rc = so_error == 0 ? 0 : -1;
    errno = so_error;
  }
  if (rc != 0) {
    *error = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

}  // namespace

StoreClient::StoreClient(std::string host, int port, std::string secret,
                         std::chrono::milliseconds timeout)
    : host_(std::move(host)), port_(port), secret_(std::move(secret)), timeout_(timeout) {}

StoreClient::~StoreClient() { Disconnect(); }

void StoreClient::Disconnect() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

// Connects, retrying until the deadline: the store may still be starting.
Status StoreClient::Connect(Clock::time_point deadline) {
  std::string last_error = "no address";
  while (true) {
    addrinfo hints;
    std::memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* addresses = nullptr;
    int rc = ::getaddrinfo(host_.c_str(), std::to_string(port_).c_str(), &hints, &addresses);
    if (rc != 0) {
      last_error = gai_strerror(rc);
    } else {
      for (addrinfo* a = addresses; a != nullptr && fd_ < 0; a = a->ai_next) {
        fd_ = ConnectBefore(a, deadline, &last_error);
      }
      ::freeaddrinfo(addresses);
    }
    if (fd_ >= 0) return Status::OK();
    if (Clock::now() >= deadline) {
      return Status::Aborted("cannot connect to the rendezvous store at " + address() +
                             " within " + std::to_string(timeout_.count() / 1000.0) +
                             " s (TUTTI_GLOO_TIMEOUT_SECONDS): " + last_error);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Status StoreClient::RequestOnce(const std::string& message, Clock::time_point deadline,
                                uint8_t* status, std::string* reply, bool* lost) {
  *lost = true;
  if (fd_ < 0) {
    Status s = Connect(deadline);
    if (!s.ok()) return s;
  }
  char header[5];
  if (!SendAll(fd_, message.data(), message.size(), deadline) ||
      !RecvAll(fd_, header, sizeof(header), deadline)) {
    Disconnect();
    return Status::Aborted("lost the connection to the rendezvous store at " + address());
  }
  *status = static_cast<uint8_t>(header[0]);
  uint32_t length = 0;
  for (int i = 1; i < 5; ++i) length = (length << 8) | static_cast<uint8_t>(header[i]);
  // Only a store answers a known status, with a value only when OK and never above its limit.
  if (*status > kStatusBadRequest || (*status != kStatusOk && length != 0) ||
      length > kMaxReplyBytes) {
    Disconnect();
    *lost = false;
    const std::string start(header, sizeof(header));
    std::string shown;
    for (char c : start) shown += (c >= 32 && c < 127) ? std::string(1, c) : std::string("?");
    return Status::InvalidArgument(
        "the service at " + address() + " is not a tutti rendezvous store (it answered '" +
        shown + "...'); check TUTTI_GLOO_RENDEZVOUS_ADDR and TUTTI_GLOO_RENDEZVOUS_PORT");
  }
  reply->clear();
  while (reply->size() < length) {
    const size_t have = reply->size();
    const size_t step = std::min<size_t>(kReplyStep, length - have);
    reply->resize(have + step);
    if (!RecvAll(fd_, &(*reply)[have], step, deadline)) {
      Disconnect();
      return Status::Aborted("lost the connection to the rendezvous store at " + address());
    }
  }
  *lost = false;
  return Status::OK();
}

Status StoreClient::Request(uint8_t op, const std::string& key, const std::string& value,
                            uint8_t* status, std::string* reply) {
  std::string message = "TST1";
  message.push_back(static_cast<char>(op));
  AppendField(&message, secret_);
  AppendField(&message, key);
  AppendField(&message, value);
  std::lock_guard<std::mutex> lock(mutex_);
  const auto deadline = Clock::now() + timeout_;
  // SET and GET are idempotent: a connection that was lost (the store closes idle ones, and
  // under a flood of strangers' connections may close a fresh one) is reopened and the
  // request sent again, until the timeout.
  Status s;
  while (true) {
    bool lost = false;
    s = RequestOnce(message, deadline, status, reply, &lost);
    if (s.ok() || !lost || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!s.ok()) return s;
  if (*status == kStatusUnauthorized) {
    Disconnect();
    return Status::InvalidArgument(
        "the rendezvous store at " + address() +
        " rejected this process's secret (TUTTI_GLOO_SECRET): it belongs to another job");
  }
  if (*status == kStatusBadRequest) {
    return Status::Internal("the rendezvous store at " + address() + " rejected a request for '" +
                            key + "' as malformed");
  }
  return Status::OK();
}

Status StoreClient::Set(const std::string& key, const std::string& value) {
  uint8_t status;
  std::string reply;
  return Request(kOpSet, key, value, &status, &reply);
}

Status StoreClient::Get(const std::string& key, std::string* value, bool* found) {
  uint8_t status;
  Status s = Request(kOpGet, key, "", &status, value);
  *found = s.ok() && status == kStatusOk;
  return s;
}

Status StoreClient::WaitAll(const std::vector<std::string>& keys,
                            std::vector<std::string>* missing) {
  const auto deadline = Clock::now() + timeout_;
  auto nap = std::chrono::milliseconds(1);
  std::vector<std::string> waiting = keys;
  while (true) {
    std::vector<std::string> still;
    for (const std::string& key : waiting) {
      std::string value;
      bool found = false;
      Status s = Get(key, &value, &found);
      if (!s.ok()) return s;
      if (!found) still.push_back(key);
    }
    waiting.swap(still);
    if (waiting.empty()) return Status::OK();
    if (Clock::now() >= deadline) {
      if (missing != nullptr) *missing = waiting;
      return Status::Aborted("timed out after " + std::to_string(timeout_.count() / 1000) +
                             " s waiting for key '" + waiting[0] + "' in the rendezvous store at " +
                             address());
    }
    std::this_thread::sleep_for(nap);
    if (nap < std::chrono::milliseconds(100)) nap *= 2;
  }
}

Status StoreClient::WaitGet(const std::string& key, std::string* value) {
  Status s = WaitAll({key}, nullptr);
  if (!s.ok()) return s;
  bool found = false;
  s = Get(key, value, &found);
  if (s.ok() && !found) return Status::Internal("key '" + key + "' vanished from the store");
  return s;
}

}  // namespace tutti
