#include "status.h"

#include <string>

namespace tutti {
namespace tensorflow_plugin {

absl::Status FromTutti(tutti_status status, const char* message) {
  if (status == TUTTI_OK) return absl::OkStatus();
  std::string text = message != nullptr && message[0] != '\0'
                         ? message
                         : "tutti reported status " + std::to_string(static_cast<int>(status));
  if (status == TUTTI_ERR_NOT_INITIALIZED && text.find("init") == std::string::npos) {
    text += "; call hvd.init() (tutti.tensorflow.init()) first";
  }
  return absl::FailedPreconditionError(text);
}

}  // namespace tensorflow_plugin
}  // namespace tutti
