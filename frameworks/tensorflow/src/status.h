// Turns the core's status codes into TensorFlow statuses.
#ifndef TUTTI_TENSORFLOW_STATUS_H_
#define TUTTI_TENSORFLOW_STATUS_H_

#include "absl/status/status.h"
#include "tutti/c_api.h"

namespace tutti {
namespace tensorflow_plugin {

// Every failure of a tutti collective surfaces in Python as
// tf.errors.FailedPreconditionError carrying the core's message; a request made before
// init() also says how to fix it.
absl::Status FromTutti(tutti_status status, const char* message);

}  // namespace tensorflow_plugin
}  // namespace tutti

#endif  // TUTTI_TENSORFLOW_STATUS_H_
