#include "base/log.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace tutti {
namespace {

// TUTTI_LOG_LEVEL (or HOROVOD_LOG_LEVEL) of ERROR or FATAL hides warnings. The core's only
// other messages are errors, which it returns to the caller rather than printing.
bool WarningsHidden() {
  static const bool hidden = [] {
    for (const char* name : {"TUTTI_LOG_LEVEL", "HOROVOD_LOG_LEVEL"}) {
      const char* value = std::getenv(name);
      if (value == nullptr || value[0] == '\0') continue;
      std::string level(value);
      for (char& c : level) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      return level == "ERROR" || level == "FATAL";
    }
    return false;
  }();
  return hidden;
}

}  // namespace

void LogWarning(const std::string& message) {
  if (WarningsHidden()) return;
  std::string line = "tutti: warning: " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace tutti
