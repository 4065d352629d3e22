#include "requests/request.h"

namespace tutti {

const char* CollectiveName(Collective collective) {
  switch (collective) {
    case Collective::kAllreduce: return "allreduce";
    case Collective::kAllgather: return "allgather";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kAlltoall: return "alltoall";
    case Collective::kReducescatter: return "reducescatter";
    case Collective::kBarrier: return "barrier";
    case Collective::kJoin: return "join";
    case Collective::kAddProcessSet: return "add_process_set";
    case Collective::kRemoveProcessSet: return "remove_process_set";
  }
  return "unknown collective";
}

bool IsPublicCollective(int value) { return value >= TUTTI_OP_ALLREDUCE && value <= TUTTI_OP_JOIN; }

}  // namespace tutti
