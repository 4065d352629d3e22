#include "transport/transport.h"

#include <cstring>

#include "base/dtype.h"

namespace tutti {

Status CreateTransport(const Config& config, std::unique_ptr<Transport>* transport) {
  Status s;
  switch (config.controller) {
    case ControllerKind::kLocal:
      *transport = CreateLocalTransport();
      return Status::OK();
    case ControllerKind::kMpi:
      s = CreateMpiTransport(config, transport);
      break;
    case ControllerKind::kGloo:
      s = CreateGlooTransport(config, transport);
      break;
  }
  if (!s.ok()) return s;
  return AddSharedMemory(config, transport);
}

Status Transport::ReduceScatter(int32_t set, int set_rank, void* buffer,
                                 const std::vector<int64_t>& counts, void* output,
                                 tutti_dtype dtype, tutti_reduce_op op) {
  int64_t total = 0, offset = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (static_cast<int>(r) < set_rank) offset += counts[r];
    total += counts[r];
  }
  Status s = Allreduce(set, buffer, total, dtype, op);
  if (!s.ok()) return s;
  const size_t element = DtypeSize(dtype);
  if (counts[set_rank] > 0) {
    std::memcpy(output, static_cast<char*>(buffer) + offset * element, counts[set_rank] * element);
  }
  return Status::OK();
}

Status Transport::SendRecv(int32_t set, int set_size, int peer, const void* send,
                            int64_t send_bytes, void* recv, int64_t recv_bytes) {
  std::vector<int64_t> send_counts(set_size, 0), recv_counts(set_size, 0);
  send_counts[peer] = send_bytes;
  recv_counts[peer] = recv_bytes;
  return Alltoallv(set, send, send_counts, recv, recv_counts, 1);
}

}  // namespace tutti
