// Core configuration read from the environment: TUTTI_<NAME>, falling back to HOROVOD_<NAME>.
#ifndef TUTTI_SRC_CONFIG_H_
#define TUTTI_SRC_CONFIG_H_

#include <functional>
#include <string>

#include "status.h"

namespace tutti {

enum class ControllerKind { kLocal, kMpi, kGloo };

const char* ControllerKindName(ControllerKind kind);

struct GlooConfig {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
  std::string rendezvous_addr;
  int rendezvous_port = 0;
  std::string secret;
  std::string iface;  // empty: use 127.0.0.1
};

struct Config {
  ControllerKind controller = ControllerKind::kLocal;
  // Negotiation cycle period. Requests arriving within one cycle are negotiated together.
  double cycle_time_ms = 1.0;
  // Bound on every blocking wait that involves another process (rendezvous, Gloo pairs).
  double timeout_seconds = 60.0;
  GlooConfig gloo;
  // How many times this process initialized before (set by init, not by the environment);
  // keeps each init's rendezvous keys apart.
  int generation = 0;
};

// Returns the value of an environment variable, or nullptr when it is unset.
using EnvLookup = std::function<const char*(const char* name)>;

// The process environment (getenv).
EnvLookup ProcessEnv();

// Parses the configuration. Every malformed value is an INVALID_ARGUMENT naming the variable.
Status ParseConfig(const EnvLookup& env, Config* config);

}  // namespace tutti

#endif  // TUTTI_SRC_CONFIG_H_
