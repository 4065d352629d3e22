#include "log.h"

#include <cstdio>

namespace tutti {

void LogWarning(const std::string& message) {
  std::string line = "tutti: warning: " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace tutti
