#include "last_error.h"

#include "ops.h"

namespace tutti_mxnet {
namespace {
thread_local std::string last_error;
}  // namespace

int Fail(const std::string& message) {
  last_error = message;
  return -1;
}

const char* LastError() { return last_error.c_str(); }

}  // namespace tutti_mxnet

extern "C" const char* tutti_mxnet_last_error(void) { return tutti_mxnet::LastError(); }
