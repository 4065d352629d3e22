// Core configuration read from the environment: TUTTI_<NAME>, falling back to HOROVOD_<NAME>.
#ifndef TUTTI_SRC_CONFIG_H_
#define TUTTI_SRC_CONFIG_H_

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"

namespace tutti {

enum class ControllerKind { kLocal, kMpi, kGloo };

// TUTTI_SHM: collectives among ranks of one host through shared memory.
enum class SharedMemoryMode { kAuto, kOn, kOff };

const char* ControllerKindName(ControllerKind kind);

// A process's place in the job: global, within its host, and its host among the hosts.
struct Topology {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
};

// The Gloo transport's settings: the topology from the launcher, and the rendezvous store.
struct GlooConfig : Topology {
  std::string rendezvous_addr;
  int rendezvous_port = 0;
  std::string secret;
  std::string iface;  // empty: use 127.0.0.1
};

struct Config {
  ControllerKind controller = ControllerKind::kLocal;
  // Longest time the core gathers requests before negotiating them. A request that arrives
  // while this rank has nothing else in flight is negotiated at once.
  double cycle_time_ms = 1.0;
  // Negotiated requests remembered so later steps skip the coordinator (0 disables).
  int cache_capacity = 1024;
  // Allreduce requests ready together are packed into buffers of at most this many bytes.
  int64_t fusion_threshold_bytes = int64_t(128) << 20;
  // Seconds a request may wait for other ranks before every rank logs a stall warning, and
  // (when positive) before it fails instead.
  bool stall_check_disabled = false;
  double stall_check_seconds = 60.0;
  double stall_shutdown_seconds = 0.0;
  // Chrome trace file written by rank 0 from init on (empty: none).
  std::string timeline_path;
  bool timeline_mark_cycles = false;  // a row with one span per negotiation cycle
  // Online search of cycle time, fusion threshold and cache use; samples logged to the file.
  bool autotune = false;
  std::string autotune_log;
  int autotune_warmup_samples = 3;   // samples discarded at the start
  int autotune_steps_per_sample = 10;  // cycles that reduced data, per sample
  int autotune_max_samples = 20;     // the search stops after this many samples
  double autotune_noise = 0.01;      // floor on the optimiser's noise-to-signal ratio
  // Bound on every blocking wait that involves another process (rendezvous, Gloo pairs).
  double timeout_seconds = 60.0;
  GlooConfig gloo;
  // auto: use shared memory where ranks share a host and it can be set up; on: fail init when
  // it cannot; off: never.
  SharedMemoryMode shm = SharedMemoryMode::kAuto;
  // Allreduce over several hosts: within each host over shared memory, across hosts among one
  // rank per host, then shared within the host.
  bool hierarchical_allreduce = true;
  // Per-rank fusion buffer inside the shared segment (fused allreduces skip a copy).
  int64_t shm_buffer_bytes = int64_t(32) << 20;
  // TUTTI_SHM_SINGLE_COPY: large allreduces and broadcasts over shared memory may read the
  // peers' buffers with one kernel copy: auto picks it or the pipeline by measured time; on
  // takes it whenever the kernel allows; off never.
  SharedMemoryMode shm_single_copy = SharedMemoryMode::kAuto;
  // TUTTI_SHM_STREAMING_STORES: how a shared-memory allreduce (past the tiny path) writes
  // its slots: auto picks ordinary or streaming (cache-bypassing) stores by measured time; on
  // always streams; off never does. Ranks may differ (each writes its own slots).
  SharedMemoryMode shm_streaming_stores = SharedMemoryMode::kAuto;
  // How many times this process initialized before (set by init, not by the environment);
  // keeps each init's rendezvous keys apart.
  int generation = 0;
  // TUTTI_ELASTIC_GENERATION, set by tuttirun's elastic mode before each init: the membership
  // generation this init joins. Its members may have initialized different numbers of times,
  // so they name their rendezvous keys and segments after it instead. -1: not elastic.
  int elastic_generation = -1;
};

// Names one init's rendezvous keys and shared-memory segments: the same on every member.
std::string RendezvousScope(const Config& config);

// Returns the value of an environment variable, or nullptr when it is unset.
using EnvLookup = std::function<const char*(const char* name)>;

// The process environment (getenv).
EnvLookup ProcessEnv();

// Parses the configuration. Every malformed value is an INVALID_ARGUMENT naming the variable.
Status ParseConfig(const EnvLookup& env, Config* config);

}  // namespace tutti

#endif  // TUTTI_SRC_CONFIG_H_
