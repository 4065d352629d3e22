// Client of the rendezvous store that tuttirun hosts (protocol: docs/architecture.md).
// Requests are "TST1" | op:u8 | secret | key | value (each a u32 big-endian length plus
// bytes); the answer is status:u8 | value. Waiting for a key is the client's job.
#ifndef TUTTI_SRC_STORE_CLIENT_H_
#define TUTTI_SRC_STORE_CLIENT_H_

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"

namespace tutti {

class StoreClient {
 public:
  // `timeout` (TUTTI_GLOO_TIMEOUT_SECONDS) bounds connecting, every request (reconnecting
  // when a connection is lost) and every WaitGet. Replies are validated: a service that is
  // not a tutti store gets a clear error, never a large allocation.
  StoreClient(std::string host, int port, std::string secret, std::chrono::milliseconds timeout);
  ~StoreClient();

  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  Status Set(const std::string& key, const std::string& value);
  // *found is false (and OK returned) when the key does not exist.
  Status Get(const std::string& key, std::string* value, bool* found);
  // Polls until `key` exists or the timeout passes (the error names the key).
  Status WaitGet(const std::string& key, std::string* value);
  // Polls until every key exists; on timeout *missing lists those still absent.
  Status WaitAll(const std::vector<std::string>& keys, std::vector<std::string>* missing);

  std::string address() const { return host_ + ":" + std::to_string(port_); }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  Status Request(uint8_t op, const std::string& key, const std::string& value, uint8_t* status,
                 std::string* reply);
  // One attempt; *lost tells whether the connection failed (worth a fresh one).
  Status RequestOnce(const std::string& message, std::chrono::steady_clock::time_point deadline,
                     uint8_t* status, std::string* reply, bool* lost);
  Status Connect(std::chrono::steady_clock::time_point deadline);
  void Disconnect();

  const std::string host_;
  const int port_;
  const std::string secret_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  int fd_ = -1;  // guarded by mutex_
};

}  // namespace tutti

#endif  // TUTTI_SRC_STORE_CLIENT_H_
