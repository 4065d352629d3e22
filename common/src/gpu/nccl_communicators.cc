#include "gpu/nccl_communicators.h"

#include <string>

namespace tutti {
namespace gpu {

Status ExchangeUniqueId(Transport* transport, int32_t set, int set_rank,
                        const std::function<Status(NcclUniqueId*)>& make_id, NcclUniqueId* id) {
  NcclUniqueId local{};
  if (set_rank == 0) {
    Status s = make_id(&local);
    // A failure on rank 0 still goes through the broadcast, as an all-zero id, so that the
    // other members fail with it instead of waiting for an id that never comes.
    if (!s.ok()) local = NcclUniqueId{};
    Status b = transport->Broadcast(set, &local, sizeof local, 0);
    if (!s.ok()) return s;
    if (!b.ok()) return b;
  } else {
    Status b = transport->Broadcast(set, &local, sizeof local, 0);
    if (!b.ok()) return b;
    bool zero = true;
    for (char c : local.internal) zero = zero && c == 0;
    if (zero) {
      return Status::Internal("the process set's rank 0 could not create an NCCL unique id");
    }
  }
  *id = local;
  return Status::OK();
}

NcclCommunicators::~NcclCommunicators() {
  for (auto& entry : comms_) nccl_->CommDestroy(entry.second);
}

Status NcclCommunicators::Check(ncclResult result, const char* what) const {
  if (result == kNcclSuccess) return Status::OK();
  return Status::Internal(std::string(what) + " failed: " + nccl_->GetErrorString(result));
}

Status NcclCommunicators::Get(int32_t set, int set_rank, int set_size, int device, int stream,
                              ncclComm* comm) {
  const auto key = std::make_tuple(set, device, stream);
  auto it = comms_.find(key);
  if (it != comms_.end()) {
    *comm = it->second;
    return Status::OK();
  }
  NcclUniqueId id;
  Status s = ExchangeUniqueId(
      transport_, set, set_rank,
      [this](NcclUniqueId* made) { return Check(nccl_->GetUniqueId(made), "ncclGetUniqueId"); },
      &id);
  if (s.ok()) s = runtime_->SetDevice(device);
  if (!s.ok()) return s;
  ncclComm created = nullptr;
  s = Check(nccl_->CommInitRank(&created, set_size, id, set_rank), "ncclCommInitRank");
  if (!s.ok()) return s;
  comms_[key] = created;
  *comm = created;
  return Status::OK();
}

void NcclCommunicators::Forget(int32_t set) {
  for (auto it = comms_.begin(); it != comms_.end();) {
    if (std::get<0>(it->first) == set) {
      nccl_->CommDestroy(it->second);
      it = comms_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace gpu
}  // namespace tutti
