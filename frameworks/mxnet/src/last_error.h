// The per-thread message behind tutti_mxnet_last_error().
#ifndef TUTTI_MXNET_LAST_ERROR_H_
#define TUTTI_MXNET_LAST_ERROR_H_

#include <string>

namespace tutti_mxnet {

// Records `message` for this thread and returns -1, the failure code of the C functions.
int Fail(const std::string& message);

const char* LastError();

}  // namespace tutti_mxnet

#endif  // TUTTI_MXNET_LAST_ERROR_H_
