// What ranks exchange during negotiation: request metadata (rank -> coordinator) and the
// coordinator's ordered responses (coordinator -> all ranks).
#ifndef TUTTI_SRC_REQUEST_H_
#define TUTTI_SRC_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tutti/c_api.h"

namespace tutti {

// The collective a request asks for. Values are part of the wire format.
enum class Collective : uint8_t {
  kAllreduce = 0,
};

const char* CollectiveName(Collective collective);

// Everything about a request that all ranks must agree on.
struct RequestMeta {
  std::string name;
  Collective collective = Collective::kAllreduce;
  tutti_reduce_op reduce_op = TUTTI_REDUCE_SUM;
  tutti_dtype dtype = TUTTI_FLOAT32;
  std::vector<int64_t> shape;
  double prescale = 1.0;
  double postscale = 1.0;
};

// One rank's message for one negotiation cycle.
struct RequestList {
  std::vector<RequestMeta> requests;
  bool shutdown = false;  // this rank asks the whole job to stop
};

struct Response {
  enum class Kind : uint8_t { kExecute = 0, kError = 1 };
  Kind kind = Kind::kExecute;
  Collective collective = Collective::kAllreduce;
  // Requests this response covers, executed in this order (several once fusion exists).
  std::vector<std::string> names;
  std::string error;  // kError only
};

// The coordinator's answer for one cycle; every rank executes it in order.
struct ResponseList {
  std::vector<Response> responses;
  // Ranks that asked to stop. When not empty, every rank leaves its loop after this cycle.
  std::vector<int32_t> shutdown_ranks;
};

}  // namespace tutti

#endif  // TUTTI_SRC_REQUEST_H_
