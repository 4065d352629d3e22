#include "base/config.h"

#include <strings.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace tutti {
namespace {

// The numeric settings and their ranges, from the table tuttirun reads too.
enum class SettingKind { kINTEGER, kNUMBER };
struct SettingRange {
  const char* name;
  SettingKind kind;
  double min;
  double max;
  const char* unit;
};
const SettingRange kSettingRanges[] = {
#define TUTTI_SETTING(name, kind, min, max, unit) {#name, SettingKind::k##kind, min, max, unit},
#include "../../python/tutti/common/settings.def"
#undef TUTTI_SETTING
};

std::string FormatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.15g", value);
  return text;
}

// Looks up TUTTI_<name>, then HOROVOD_<name>; stores the variable actually found in *found.
const char* Lookup(const EnvLookup& env, const std::string& name, std::string* found) {
  for (const char* prefix : {"TUTTI_", "HOROVOD_"}) {
    std::string var = prefix + name;
    const char* value = env(var.c_str());
    if (value != nullptr && value[0] != '\0') {
      *found = var;
      return value;
    }
  }
  return nullptr;
}

Status Malformed(const std::string& var, const char* value, const char* expected) {
  return Status::InvalidArgument("environment variable " + var + "='" + value + "' is not " +
                                 expected);
}

// Reads an integer in [min_value, max_value]; leaves *out unchanged when unset.
Status ReadInt(const EnvLookup& env, const std::string& name, int min_value, int max_value,
               int* out) {
  std::string var;
  const char* value = Lookup(env, name, &var);
  if (value == nullptr) return Status::OK();
  char* end = nullptr;
  errno = 0;
  long parsed = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || errno == ERANGE) {
    return Malformed(var, value, "an integer");
  }
  if (parsed < min_value || parsed > max_value) {
    return Malformed(var, value,
                     ("in the range [" + std::to_string(min_value) + ", " +
                      std::to_string(max_value) + "]").c_str());
  }
  *out = static_cast<int>(parsed);
  return Status::OK();
}

// Reads the numeric setting `name` of the shared table, checked against its range; leaves
// *out unchanged when unset.
Status ReadSetting(const EnvLookup& env, const std::string& name, double* out) {
  const SettingRange* range = nullptr;
  for (const SettingRange& r : kSettingRanges) {
    if (name == r.name) range = &r;
  }
  if (range == nullptr) return Status::Internal("no range is defined for setting " + name);
  std::string var;
  const char* value = Lookup(env, name, &var);
  if (value == nullptr) return Status::OK();
  const bool integer = range->kind == SettingKind::kINTEGER;
  char* end = nullptr;
  errno = 0;
  double parsed = integer ? static_cast<double>(std::strtoll(value, &end, 10))
                          : std::strtod(value, &end);
  if (end == value || *end != '\0') {
    return Malformed(var, value, integer ? "an integer" : "a number");
  }
  if (errno == ERANGE || !std::isfinite(parsed) || parsed < range->min || parsed > range->max) {
    std::string unit = range->unit[0] != '\0' ? std::string(" (") + range->unit + ")" : "";
    return Status::InvalidArgument("environment variable " + var + "='" + value +
                                   "' is out of range: it must be " +
                                   (integer ? "an integer" : "a number") + " from " +
                                   FormatNumber(range->min) + " to " +
                                   FormatNumber(range->max) + unit);
  }
  *out = parsed;
  return Status::OK();
}

Status ReadSetting(const EnvLookup& env, const std::string& name, int* out) {
  double value = *out;
  Status s = ReadSetting(env, name, &value);
  *out = static_cast<int>(value);  // the table's integer ranges fit in int
  return s;
}

Status ReadSetting(const EnvLookup& env, const std::string& name, int64_t* out) {
  double value = static_cast<double>(*out);
  Status s = ReadSetting(env, name, &value);
  *out = static_cast<int64_t>(value);  // the table's ranges fit in 64 bits
  return s;
}

// Reads an on/off switch spelled as Horovod reads it: a whole number, 0 is off and a
// positive one on. Words such as "true" are refused (Horovod would read "true" as 0, off).
Status ReadBool(const EnvLookup& env, const std::string& name, bool* out) {
  std::string var;
  const char* value = Lookup(env, name, &var);
  if (value == nullptr) return Status::OK();
  char* end = nullptr;
  errno = 0;
  long long parsed = std::strtoll(value, &end, 10);
  if (end == value || *end != '\0' || errno == ERANGE || parsed < 0) {
    return Status::InvalidArgument("environment variable " + var + "='" + value +
                                   "' is not a switch: use 1 (on) or 0 (off), as Horovod does");
  }
  *out = parsed > 0;
  return Status::OK();
}

std::string ReadString(const EnvLookup& env, const std::string& name) {
  std::string var;
  const char* value = Lookup(env, name, &var);
  return value == nullptr ? std::string() : std::string(value);
}

bool IsSet(const EnvLookup& env, const char* name) {
  const char* value = env(name);
  return value != nullptr && value[0] != '\0';
}

Status ChooseController(const EnvLookup& env, const std::string& rendezvous_addr,
                        ControllerKind* kind) {
  std::string var;
  const char* value = Lookup(env, "CONTROLLER", &var);
  if (value != nullptr) {
    std::string name(value);
    // Horovod compares without regard to case (HOROVOD_CONTROLLER=MPI, Gloo, ...).
    if (strcasecmp(value, "mpi") == 0) {
      *kind = ControllerKind::kMpi;
    } else if (strcasecmp(value, "gloo") == 0) {
      *kind = ControllerKind::kGloo;
    } else {
      return Status::InvalidArgument("environment variable " + var + "='" + name +
                                     "' is not a known controller; valid choices: mpi, gloo");
    }
    return Status::OK();
  }
  if (IsSet(env, "OMPI_COMM_WORLD_SIZE") || IsSet(env, "PMI_SIZE") || IsSet(env, "PMIX_RANK")) {
    *kind = ControllerKind::kMpi;
  } else if (!rendezvous_addr.empty()) {
    *kind = ControllerKind::kGloo;
  } else {
    *kind = ControllerKind::kLocal;
  }
  return Status::OK();
}

Status ParseGloo(const EnvLookup& env, GlooConfig* gloo) {
  const int kMaxRanks = 1 << 20;
  Status s;
  if (!(s = ReadInt(env, "SIZE", 1, kMaxRanks, &gloo->size)).ok()) return s;
  if (!(s = ReadInt(env, "RANK", 0, kMaxRanks, &gloo->rank)).ok()) return s;
  gloo->local_size = gloo->size;
  gloo->local_rank = gloo->rank;
  if (!(s = ReadInt(env, "LOCAL_SIZE", 1, kMaxRanks, &gloo->local_size)).ok()) return s;
  if (!(s = ReadInt(env, "LOCAL_RANK", 0, kMaxRanks, &gloo->local_rank)).ok()) return s;
  if (!(s = ReadInt(env, "CROSS_SIZE", 1, kMaxRanks, &gloo->cross_size)).ok()) return s;
  if (!(s = ReadInt(env, "CROSS_RANK", 0, kMaxRanks, &gloo->cross_rank)).ok()) return s;
  if (!(s = ReadInt(env, "GLOO_RENDEZVOUS_PORT", 1, 65535, &gloo->rendezvous_port)).ok()) {
    return s;
  }
  gloo->secret = ReadString(env, "GLOO_SECRET");
  gloo->iface = ReadString(env, "GLOO_IFACE");
  if (gloo->rendezvous_addr.empty()) {
    return Status::InvalidArgument(
        "the Gloo controller needs a rendezvous store (TUTTI_GLOO_RENDEZVOUS_ADDR is not set): "
        "start the job with tuttirun, e.g. `tuttirun -np 2 python train.py`");
  }
  if (gloo->rendezvous_port == 0) {
    return Status::InvalidArgument(
        "TUTTI_GLOO_RENDEZVOUS_PORT is not set: start the job with tuttirun");
  }
  if (gloo->rank >= gloo->size) {
    return Status::InvalidArgument("TUTTI_RANK=" + std::to_string(gloo->rank) +
                                   " is not below TUTTI_SIZE=" + std::to_string(gloo->size));
  }
  if (gloo->local_rank >= gloo->local_size) {
    return Status::InvalidArgument("TUTTI_LOCAL_RANK=" + std::to_string(gloo->local_rank) +
                                   " is not below TUTTI_LOCAL_SIZE=" +
                                   std::to_string(gloo->local_size));
  }
  if (gloo->cross_rank >= gloo->cross_size) {
    return Status::InvalidArgument("TUTTI_CROSS_RANK=" + std::to_string(gloo->cross_rank) +
                                   " is not below TUTTI_CROSS_SIZE=" +
                                   std::to_string(gloo->cross_size));
  }
  return Status::OK();
}

}  // namespace

const char* ControllerKindName(ControllerKind kind) {
  switch (kind) {
    case ControllerKind::kMpi:
      return "mpi";
    case ControllerKind::kGloo:
      return "gloo";
    case ControllerKind::kLocal:
      return "local";
  }
  return "unknown";
}

std::string RendezvousScope(const Config& config) {
  if (config.elastic_generation >= 0) return "e" + std::to_string(config.elastic_generation);
  return std::to_string(config.generation);
}

EnvLookup ProcessEnv() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

Status ParseConfig(const EnvLookup& env, Config* config) {
  Config result;
  Status s;
  if (!(s = ReadSetting(env, "CYCLE_TIME", &result.cycle_time_ms)).ok()) return s;
  if (!(s = ReadSetting(env, "GLOO_TIMEOUT_SECONDS", &result.timeout_seconds)).ok()) return s;
  if (!(s = ReadSetting(env, "CACHE_CAPACITY", &result.cache_capacity)).ok()) return s;
  if (!(s = ReadSetting(env, "FUSION_THRESHOLD", &result.fusion_threshold_bytes)).ok()) return s;
  if (!(s = ReadSetting(env, "STALL_CHECK_TIME_SECONDS", &result.stall_check_seconds)).ok()) {
    return s;
  }
  if (!(s = ReadSetting(env, "STALL_SHUTDOWN_TIME_SECONDS", &result.stall_shutdown_seconds))
           .ok()) {
    return s;
  }
  {
    // Not used by this build (no NCCL streams yet), but a bad value is still an error.
    int nccl_streams = 1;
    if (!(s = ReadSetting(env, "NUM_NCCL_STREAMS", &nccl_streams)).ok()) return s;
  }
  for (const auto& setting : {std::make_pair("SHM", &result.shm),
                               std::make_pair("SHM_SINGLE_COPY", &result.shm_single_copy),
                               std::make_pair("SHM_STREAMING_STORES",
                                              &result.shm_streaming_stores)}) {
    std::string var;
    const char* value = Lookup(env, setting.first, &var);
    const std::string mode = value ? value : "auto";
    if (mode == "auto") {
      *setting.second = SharedMemoryMode::kAuto;
    } else if (mode == "on" || mode == "1") {
      *setting.second = SharedMemoryMode::kOn;
    } else if (mode == "off" || mode == "0") {
      *setting.second = SharedMemoryMode::kOff;
    } else {
      return Malformed(var, value, "one of auto, on, off");
    }
  }
  if (!(s = ReadBool(env, "HIERARCHICAL_ALLREDUCE", &result.hierarchical_allreduce)).ok()) {
    return s;
  }
  if (!(s = ReadSetting(env, "SHM_BUFFER_BYTES", &result.shm_buffer_bytes)).ok()) return s;
  result.timeline_path = ReadString(env, "TIMELINE");
  // As in Horovod, TIMELINE=DYNAMIC starts no timeline at init: start_timeline() does later.
  if (result.timeline_path == "DYNAMIC") result.timeline_path.clear();
  if (!(s = ReadBool(env, "TIMELINE_MARK_CYCLES", &result.timeline_mark_cycles)).ok()) return s;
  if (!(s = ReadBool(env, "STALL_CHECK_DISABLE", &result.stall_check_disabled)).ok()) return s;
  if (!(s = ReadBool(env, "AUTOTUNE", &result.autotune)).ok()) return s;
  result.autotune_log = ReadString(env, "AUTOTUNE_LOG");
  if (!(s = ReadSetting(env, "AUTOTUNE_WARMUP_SAMPLES", &result.autotune_warmup_samples)).ok()) {
    return s;
  }
  if (!(s = ReadSetting(env, "AUTOTUNE_STEPS_PER_SAMPLE", &result.autotune_steps_per_sample))
           .ok()) {
    return s;
  }
  if (!(s = ReadSetting(env, "AUTOTUNE_GAUSSIAN_PROCESS_NOISE", &result.autotune_noise)).ok()) {
    return s;
  }
  if (!(s = ReadSetting(env, "AUTOTUNE_BAYES_OPT_MAX_SAMPLES", &result.autotune_max_samples))
           .ok()) {
    return s;
  }
  if (!(s = ReadInt(env, "ELASTIC_GENERATION", 0, 1 << 30, &result.elastic_generation)).ok()) {
    return s;
  }
  result.gloo.rendezvous_addr = ReadString(env, "GLOO_RENDEZVOUS_ADDR");
  if (!(s = ChooseController(env, result.gloo.rendezvous_addr, &result.controller)).ok()) {
    return s;
  }
  if (result.controller == ControllerKind::kGloo) {
    if (!(s = ParseGloo(env, &result.gloo)).ok()) return s;
  }
  *config = result;
  return Status::OK();
}

}  // namespace tutti
