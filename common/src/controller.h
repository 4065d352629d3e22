// A Controller is the transport a context runs on: the process topology, the two
// primitives negotiation needs, and the data-plane collectives. Implementations: local (one
// process, no transport), MPI and Gloo; CreateController picks one from the configuration.
//
// Every method except the topology getters is called only from the core's background thread.
#ifndef TUTTI_SRC_CONTROLLER_H_
#define TUTTI_SRC_CONTROLLER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config.h"
#include "status.h"
#include "tutti/c_api.h"

namespace tutti {

struct Topology {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
};

class Controller {
 public:
  virtual ~Controller() = default;

  virtual const char* name() const = 0;
  virtual const Topology& topology() const = 0;

  // Negotiation: each rank contributes `mine`; rank 0 receives every rank's bytes in rank
  // order in *all (other ranks get an empty vector).
  virtual Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) = 0;
  // Negotiation: rank 0's *bytes replaces *bytes on every other rank.
  virtual Status BroadcastFromRoot(std::string* bytes) = 0;

  // In-place elementwise reduction of `count` elements across all ranks. `op` is SUM, MIN,
  // MAX or PRODUCT (AVERAGE and scaling are done by the caller).
  virtual Status Allreduce(void* buffer, int64_t count, tutti_dtype dtype,
                           tutti_reduce_op op) = 0;
};

// Connects the controller chosen by config.controller. Blocks until every rank has joined or
// the configured timeout passes.
Status CreateController(const Config& config, std::unique_ptr<Controller>* controller);

// Implementations (each in its own file).
std::unique_ptr<Controller> CreateLocalController();
Status CreateMpiController(const Config& config, std::unique_ptr<Controller>* controller);
Status CreateGlooController(const Config& config, std::unique_ptr<Controller>* controller);

}  // namespace tutti

#endif  // TUTTI_SRC_CONTROLLER_H_
