#include "store_client.h"

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

}  // namespace

StoreClient::StoreClient(std::string host, int port, std::string secret,
                         std::chrono::milliseconds timeout)
    : host_(std::move(host)), port_(port), secret_(std::move(secret)), timeout_(timeout) {}

StoreClient::~StoreClient() { Disconnect(); }

void StoreClient::Disconnect() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

// Connects, retrying until the timeout: the store may still be starting.
Status StoreClient::Connect() {
  const auto deadline = Clock::now() + timeout_;
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
        int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          fd_ = fd;
        } else {
          last_error = std::strerror(errno);
          ::close(fd);
        }
      }
      ::freeaddrinfo(addresses);
    }
    if (fd_ >= 0) return Status::OK();
    if (Clock::now() >= deadline) {
      return Status::Aborted("cannot connect to the rendezvous store at " + address() + ": " +
                             last_error);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Status StoreClient::RequestOnce(const std::string& message, uint8_t* status, std::string* reply) {
  if (fd_ < 0) {
    Status s = Connect();
    if (!s.ok()) return s;
  }
  const auto deadline = Clock::now() + timeout_;
  char header[5];
  if (!SendAll(fd_, message.data(), message.size(), deadline) ||
      !RecvAll(fd_, header, sizeof(header), deadline)) {
    Disconnect();
    return Status::Aborted("lost the connection to the rendezvous store at " + address());
  }
  *status = static_cast<uint8_t>(header[0]);
  uint32_t length = 0;
  for (int i = 1; i < 5; ++i) length = (length << 8) | static_cast<uint8_t>(header[i]);
  reply->resize(length);
  if (length > 0 && !RecvAll(fd_, &(*reply)[0], length, deadline)) {
    Disconnect();
    return Status::Aborted("lost the connection to the rendezvous store at " + address());
  }
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
  const bool was_connected = fd_ >= 0;
  Status s = RequestOnce(message, status, reply);
  // A connection that went stale gets one fresh attempt; a failed connect already retried
  // until the timeout.
  if (!s.ok() && was_connected) s = RequestOnce(message, status, reply);
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
  if (*status != kStatusOk && *status != kStatusNotFound) {
    return Status::Internal("the rendezvous store at " + address() + " answered status " +
                            std::to_string(*status));
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
