// Messages the core prints itself (warnings that have no caller to return them to).
#ifndef TUTTI_SRC_LOG_H_
#define TUTTI_SRC_LOG_H_

#include <string>

namespace tutti {

// Writes "tutti: warning: <message>" to stderr as one line, unless TUTTI_LOG_LEVEL (or
// HOROVOD_LOG_LEVEL) is ERROR or FATAL.
void LogWarning(const std::string& message);

}  // namespace tutti

#endif  // TUTTI_SRC_LOG_H_
