#include "gpu/nccl_operations.h"

#include "base/collective_plan.h"
#include "base/dtype.h"
#include "gpu/nccl_types.h"
#include "gpu/copy_plan.h"

namespace tutti {
namespace gpu {
namespace {

// Displacements (exclusive prefix sums) of counts.
std::vector<int64_t> Offsets(const std::vector<int64_t>& counts) {
  std::vector<int64_t> offsets;
  int64_t sum = 0;
  for (int64_t c : counts) {
    offsets.push_back(sum);
    sum += c;
  }
  return offsets;
}

bool AllEqual(const std::vector<int64_t>& values) {
  for (int64_t v : values) {
    if (v != values[0]) return false;
  }
  return true;
}

}  // namespace

NcclOperations::NcclOperations(const NcclApi* nccl, DeviceRuntime* runtime,
                               Transport* transport, ProcessSetRegistry* sets, int rank,
                               const GpuConfig& config)
    : nccl_(nccl),
      runtime_(runtime),
      sets_(sets),
      rank_(rank),
      config_(config),
      comms_(nccl, transport, runtime),
      fusion_([runtime](const std::pair<int, int>& key, size_t bytes, void** data) {
                return runtime->AllocateDevice(key.first, bytes, data);
              },
              [runtime](void* data) { runtime->FreeDevice(data); }) {}

template <typename Calls>
Status NcclOperations::Grouped(Calls calls) {
  Status s = Check(nccl_->GroupStart(), "ncclGroupStart");
  if (!s.ok()) return s;
  s = calls();
  // The group is closed even after a failed call, so NCCL's state stays consistent.
  Status end = Check(nccl_->GroupEnd(), "ncclGroupEnd");
  return s.ok() ? end : s;
}

Status NcclOperations::Check(ncclResult result, const char* what) const {
  if (result == kNcclSuccess) return Status::OK();
  return Status::Internal(std::string(what) + " failed: " + nccl_->GetErrorString(result) +
                          " (NCCL error " + std::to_string(result) + ")");
}

bool NcclOperations::Enabled(const Response& response, const PendingOp& op,
                             std::string* why_not) const {
  if (config_.operations != GpuOperations::kNccl) {
    *why_not = "TUTTI_GPU_OPERATIONS asks for the staged path";
    return false;
  }
  if (!response.joined_ranks.empty()) {
    *why_not = "joined ranks take part with host zeros";
    return false;
  }
  switch (response.collective) {
    case Collective::kAllreduce:
    case Collective::kReducescatter: {
      NcclReduction plan;
      return PlanNcclReduction(op.meta.dtype, op.meta.reduce_op, op.meta.prescale,
                               op.meta.postscale, sets_->Size(response.process_set), &plan,
                               why_not);
    }
    case Collective::kAllgather:
    case Collective::kBroadcast:
    case Collective::kAlltoall:
      return true;
    default:
      *why_not = std::string(CollectiveName(response.collective)) + " has no tensors";
      return false;
  }
}

Status NcclOperations::Begin(int32_t set, const std::vector<const PendingOp*>& ops,
                             Launch* l) {
  l->device = ops[0]->device.index;
  l->set_rank = sets_->RankIn(set, rank_);
  l->set_size = sets_->Size(set);
  int& next = next_stream_[set];
  l->stream_index = next;
  next = (next + 1) % config_.num_nccl_streams;
  Status s = runtime_->SetDevice(l->device);
  if (s.ok()) s = runtime_->Stream(l->device, l->stream_index, &l->stream);
  if (s.ok()) s = comms_.Get(set, l->set_rank, l->set_size, l->device, l->stream_index, &l->comm);
  if (s.ok()) s = WaitForInputs(runtime_, l->stream, ops);
  return s;
}

template <typename Call>
Status NcclOperations::Reduce(const PendingOp& op, const Launch& l, int set_size, Call call) {
  NcclReduction plan;
  std::string why_not;
  if (!PlanNcclReduction(op.meta.dtype, op.meta.reduce_op, op.meta.prescale, op.meta.postscale,
                         set_size, &plan, &why_not)) {
    return Status::Internal("NCCL reduction: " + why_not);
  }
  int type = 0;
  NcclReduceType(op.meta.dtype, &type);
  int nccl_op = plan.op;
  if (plan.scaling) {
    uint64_t scalar;
    EncodeScalar(op.meta.dtype, plan.scalar, &scalar);
    Status s = Check(nccl_->RedOpCreatePreMulSum(&nccl_op, &scalar, type, kNcclScalarHostImmediate,
                                                 l.comm),
                     "ncclRedOpCreatePreMulSum");
    if (!s.ok()) return s;
  }
  Status s = call(type, nccl_op);
  // An op may be destroyed as soon as the calls using it are enqueued.
  if (plan.scaling) nccl_->RedOpDestroy(nccl_op, l.comm);
  return s;
}

Status NcclOperations::Allreduce(int32_t set, const std::vector<const PendingOp*>& ops) {
  Launch l;
  Status s = Begin(set, ops, &l);
  if (!s.ok()) return s;
  const PendingOp& first = *ops[0];
  const size_t element = DtypeSize(first.meta.dtype);
  const FlatTensors flat = Flatten(ops);
  const std::vector<const void*>& inputs = flat.inputs;
  const std::vector<void*>& outputs = flat.outputs;
  const std::vector<size_t>& bytes = flat.bytes;
  const PackedLayout layout = PackTensors(bytes, element);
  const size_t count = layout.total_bytes / element;
  const bool fused = inputs.size() > 1;
  const void* send = inputs[0];
  void* recv = outputs[0];
  char* buffer = nullptr;
  if (fused) {
    // Work queued on this stream may still read a buffer that is replaced.
    buffer = fusion_.Get(std::make_pair(l.device, l.stream_index), layout.total_bytes, &s,
                         [&] { return runtime_->Synchronize(l.stream); });
    if (buffer == nullptr) return s;
    // One batched copy in, one out: not a memcpy call per tensor.
    s = runtime_->CopyOnDevice(l.stream, CopiesIn(layout, inputs, bytes, buffer));
    if (!s.ok()) return s;
    send = recv = buffer;
  }
  s = Reduce(first, l, l.set_size, [&](int type, int op) {
    return Check(nccl_->AllReduce(send, recv, count, type, op, l.comm, l.stream),
                 "ncclAllReduce");
  });
  if (s.ok() && fused) s = runtime_->CopyOnDevice(l.stream, CopiesOut(layout, outputs, bytes, buffer));
  if (s.ok()) s = FinishOnStream(runtime_, l.stream, ops);
  return s;
}

Status NcclOperations::Execute(const Response& response, const PendingOp& op) {
  if (response.collective == Collective::kAllreduce) {
    return Allreduce(response.process_set, {&op});
  }
  Launch l;
  Status s = Begin(response.process_set, {&op}, &l);
  if (!s.ok()) return s;
  switch (response.collective) {
    case Collective::kAllgather: s = Allgather(response, op, l); break;
    case Collective::kAlltoall: s = Alltoall(response, op, l); break;
    case Collective::kReducescatter: s = Reducescatter(op, l); break;
    case Collective::kBroadcast: {
      const TensorView& t = op.tensors[0];
      const size_t bytes = ElementCount(t.shape) * DtypeSize(op.meta.dtype);
      s = Check(nccl_->Broadcast(t.input, t.output, bytes, kNcclUint8, op.meta.root_rank, l.comm,
                                 l.stream),
                "ncclBroadcast");
      break;
    }
    default:
      s = Status::Internal("NCCL cannot run " + std::string(CollectiveName(response.collective)));
  }
  if (s.ok()) s = FinishOnStream(runtime_, l.stream, {&op});
  return s;
}

Status NcclOperations::Allgather(const Response& response, const PendingOp& op, const Launch& l) {
  const size_t element = DtypeSize(op.meta.dtype);
  for (size_t i = 0; i < op.tensors.size(); ++i) {
    const TensorView& t = op.tensors[i];
    std::vector<int64_t> shape = t.shape;
    std::vector<int64_t> counts;  // bytes from each rank
    shape[0] = 0;
    for (int r = 0; r < l.set_size; ++r) {
      const int64_t rows = response.sizes[i * l.set_size + r];
      shape[0] += rows;
      counts.push_back(rows * RowElements(t.shape) * static_cast<int64_t>(element));
    }
    void* output = op.allocate(op.user_data, static_cast<int32_t>(i),
                               static_cast<int32_t>(shape.size()), shape.data());
    if (output == nullptr && ElementCount(shape) > 0) {
      return Status::Internal("the allocate callback returned NULL for output " +
                              std::to_string(i));
    }
    Status s;
    if (AllEqual(counts)) {
      s = Check(nccl_->AllGather(t.input, output, counts[0], kNcclUint8, l.comm, l.stream),
                "ncclAllGather");
    } else {
      // Uneven parts: every rank broadcasts its own, as one grouped operation.
      const std::vector<int64_t> offsets = Offsets(counts);
      s = Grouped([&] {
        Status b;
        for (int r = 0; r < l.set_size && b.ok(); ++r) {
          b = Check(nccl_->Broadcast(t.input, static_cast<char*>(output) + offsets[r], counts[r],
                                     kNcclUint8, r, l.comm, l.stream),
                    "ncclBroadcast");
        }
        return b;
      });
    }
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status NcclOperations::Alltoall(const Response& response, const PendingOp& op, const Launch& l) {
  const TensorView& t = op.tensors[0];
  const int64_t row_bytes = RowElements(t.shape) * static_cast<int64_t>(DtypeSize(op.meta.dtype));
  std::vector<int64_t> sent(response.sizes.begin() + l.set_rank * l.set_size,
                            response.sizes.begin() + (l.set_rank + 1) * l.set_size);
  std::vector<int64_t> received = ReceivedSplits(response.sizes, l.set_size, l.set_rank);
  std::vector<int64_t> shape = t.shape;
  shape[0] = 0;
  for (int64_t r : received) shape[0] += r;
  void* output = op.allocate(op.user_data, 0, static_cast<int32_t>(shape.size()), shape.data());
  if (output == nullptr && ElementCount(shape) > 0) {
    return Status::Internal("the allocate callback returned NULL for output 0");
  }
  const std::vector<int64_t> send_offsets = Offsets(sent);
  const std::vector<int64_t> recv_offsets = Offsets(received);
  Status s = Grouped([&] {
    Status r;
    for (int peer = 0; peer < l.set_size && r.ok(); ++peer) {
      if (sent[peer] > 0) {
        r = Check(nccl_->Send(static_cast<const char*>(t.input) + send_offsets[peer] * row_bytes,
                              sent[peer] * row_bytes, kNcclUint8, peer, l.comm, l.stream),
                  "ncclSend");
      }
      if (r.ok() && received[peer] > 0) {
        r = Check(nccl_->Recv(static_cast<char*>(output) + recv_offsets[peer] * row_bytes,
                              received[peer] * row_bytes, kNcclUint8, peer, l.comm, l.stream),
                  "ncclRecv");
      }
    }
    return r;
  });
  if (s.ok() && op.received_splits != nullptr) {
    for (int i = 0; i < l.set_size; ++i) op.received_splits[i] = static_cast<int32_t>(received[i]);
  }
  return s;
}

Status NcclOperations::Reducescatter(const PendingOp& op, const Launch& l) {
  const size_t element = DtypeSize(op.meta.dtype);
  for (size_t i = 0; i < op.tensors.size(); ++i) {
    const TensorView& t = op.tensors[i];
    const std::vector<int64_t> rows = ReducescatterRows(t.shape[0], l.set_size);
    const int64_t row = RowElements(t.shape);
    std::vector<int64_t> counts;
    for (int64_t r : rows) counts.push_back(r * row);
    std::vector<int64_t> shape = t.shape;
    shape[0] = rows[l.set_rank];
    void* output = op.allocate(op.user_data, static_cast<int32_t>(i),
                               static_cast<int32_t>(shape.size()), shape.data());
    if (output == nullptr && ElementCount(shape) > 0) {
      return Status::Internal("the allocate callback returned NULL for output " +
                              std::to_string(i));
    }
    const std::vector<int64_t> offsets = Offsets(counts);
    Status s = Reduce(op, l, l.set_size, [&](int type, int nccl_op) {
      if (AllEqual(counts)) {
        return Check(nccl_->ReduceScatter(t.input, output, counts[0], type, nccl_op, l.comm,
                                          l.stream),
                     "ncclReduceScatter");
      }
      // Uneven parts: one reduce to each part's owner, as one grouped operation.
      return Grouped([&] {
        Status r;
        for (int root = 0; root < l.set_size && r.ok(); ++root) {
          r = Check(nccl_->Reduce(static_cast<const char*>(t.input) + offsets[root] * element,
                                  output, counts[root], type, nccl_op, root, l.comm, l.stream),
                    "ncclReduce");
        }
        return r;
      });
    });
    if (!s.ok()) return s;
  }
  return Status::OK();
}

}  // namespace gpu
}  // namespace tutti
