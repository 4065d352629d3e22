#include "gpu/gpu_config.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

namespace tutti {
namespace gpu {
namespace {

// The value of TUTTI_<name>, else HOROVOD_<name>; `used` receives the variable's full name.
bool Lookup(const EnvLookup& env, const std::string& name, std::string* value,
            std::string* used) {
  for (const char* prefix : {"TUTTI_", "HOROVOD_"}) {
    const std::string full = prefix + name;
    const char* v = env(full.c_str());
    if (v != nullptr && *v != '\0') {
      *value = v;
      *used = full;
      return true;
    }
  }
  return false;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

Status ParseGpuConfig(const EnvLookup& env, GpuConfig* config) {
  GpuConfig result;
  std::string value, used;
  if (Lookup(env, "GPU_OPERATIONS", &value, &used)) {
    const std::string v = Lower(value);
    if (v == "nccl") {
      result.operations = GpuOperations::kNccl;
    } else if (v == "mpi" || v == "gloo") {
      result.operations = GpuOperations::kStaged;
    } else {
      return Status::InvalidArgument(used + "='" + value + "' is not one of: nccl, mpi, gloo");
    }
  }
  if (Lookup(env, "NUM_NCCL_STREAMS", &value, &used)) {
    char* end = nullptr;
    const long n = std::strtol(value.c_str(), &end, 10);
    if (end == value.c_str() || *end != '\0' || n < 1 || n > 64) {
      return Status::InvalidArgument(used + "='" + value + "' is not a whole number from 1 to 64");
    }
    result.num_nccl_streams = static_cast<int>(n);
  }
  *config = result;
  return Status::OK();
}

}  // namespace gpu
}  // namespace tutti
