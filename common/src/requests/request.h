// What ranks exchange during negotiation: request metadata (rank -> coordinator) and the
// coordinator's ordered responses (coordinator -> all ranks).
#ifndef TUTTI_SRC_REQUEST_H_
#define TUTTI_SRC_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tutti/c_api.h"

namespace tutti {

// The collective a request asks for. Values are part of the wire format; the public ones equal
// tutti_collective, the internal ones (process-set changes) follow.
enum class Collective : uint8_t {
  kAllreduce = TUTTI_OP_ALLREDUCE,
  kAllgather = TUTTI_OP_ALLGATHER,
  kBroadcast = TUTTI_OP_BROADCAST,
  kAlltoall = TUTTI_OP_ALLTOALL,
  kReducescatter = TUTTI_OP_REDUCESCATTER,
  kBarrier = TUTTI_OP_BARRIER,
  kJoin = TUTTI_OP_JOIN,
  kAddProcessSet = 100,     // shapes[0]: the member ranks
  kRemoveProcessSet = 101,  // shapes[0]: {id}
};

const char* CollectiveName(Collective collective);
bool IsPublicCollective(int value);

// Everything about a request that all ranks must agree on, plus the per-rank values the
// coordinator collects for execution (the first dimensions, alltoall splits).
struct RequestMeta {
  std::string name;
  Collective collective = Collective::kAllreduce;
  int32_t process_set = TUTTI_GLOBAL_PROCESS_SET;
  tutti_reduce_op reduce_op = TUTTI_REDUCE_SUM;
  tutti_dtype dtype = TUTTI_FLOAT32;
  std::vector<std::vector<int64_t>> shapes;  // one per tensor of the request
  double prescale = 1.0;
  double postscale = 1.0;
  int32_t root_rank = 0;        // broadcast: the root's rank within the set (the C ABI's
                                // global root_rank, translated by BuildRequest)
  std::vector<int64_t> splits;  // alltoall: rows sent to each rank of the set
  tutti_device_type device = TUTTI_DEVICE_CPU;  // where the tensors live (not the ordinal)
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
  // Requests this response covers, executed in this order.
  std::vector<std::string> names;
  std::string error;  // kError only
  int32_t process_set = TUTTI_GLOBAL_PROCESS_SET;
  // What a joined rank needs to take part in an allreduce it did not submit.
  tutti_dtype dtype = TUTTI_FLOAT32;
  tutti_reduce_op reduce_op = TUTTI_REDUCE_SUM;
  std::vector<int64_t> counts;  // allreduce: elements per tensor
  // Global ranks of the set that joined instead of submitting (they contribute zeros).
  std::vector<int32_t> joined_ranks;
  // allgather: first dimension of each tensor on each set rank, [tensor * set_size + rank];
  // alltoall: rows rank i sends to rank j, [i * set_size + j].
  std::vector<int64_t> sizes;
  int32_t join_result = -1;  // join: the last rank to join
};

// The coordinator's answer for one cycle; every rank executes it in order.
struct ResponseList {
  std::vector<Response> responses;
  // Ranks that asked to stop. When not empty, every rank leaves its loop after this cycle.
  std::vector<int32_t> shutdown_ranks;
  // Messages every rank logs (stall reports).
  std::vector<std::string> warnings;
  // Settings every rank adopts from this cycle on (autotune): cycle time in ms, fusion
  // threshold in bytes, response cache on (1) or off (0). Empty: unchanged.
  std::vector<double> tuning;
};

}  // namespace tutti

#endif  // TUTTI_SRC_REQUEST_H_
