// Status: a result code from the C ABI plus a human-readable message. Errors are values
// inside the core; only c_api.cc turns them into return codes and the last-error text.
#ifndef TUTTI_SRC_STATUS_H_
#define TUTTI_SRC_STATUS_H_

#include <string>
#include <utility>

#include "tutti/c_api.h"

namespace tutti {

class Status {
 public:
  Status() = default;
  Status(tutti_status code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) { return {TUTTI_ERR_INVALID_ARGUMENT, std::move(m)}; }
  static Status Precondition(std::string m) { return {TUTTI_ERR_PRECONDITION, std::move(m)}; }
  static Status Unsupported(std::string m) { return {TUTTI_ERR_UNSUPPORTED, std::move(m)}; }
  static Status Aborted(std::string m) { return {TUTTI_ERR_ABORTED, std::move(m)}; }
  static Status Internal(std::string m) { return {TUTTI_ERR_INTERNAL, std::move(m)}; }
  static Status NotInitialized(std::string m) { return {TUTTI_ERR_NOT_INITIALIZED, std::move(m)}; }

  bool ok() const { return code_ == TUTTI_OK; }
  tutti_status code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  tutti_status code_ = TUTTI_OK;
  std::string message_;
};

}  // namespace tutti

#endif  // TUTTI_SRC_STATUS_H_
