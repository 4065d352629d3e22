#include "execution/collective_execution.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "kernels/adasum.h"
#include "base/collective_plan.h"
#include "base/dtype.h"
#include "kernels/reduce_kernels.h"

namespace tutti {
namespace {

// AVERAGE is a SUM on the wire, divided by the set size afterwards.
tutti_reduce_op WireOp(tutti_reduce_op op) {
  return op == TUTTI_REDUCE_AVERAGE ? TUTTI_REDUCE_SUM : op;
}

// Whether each tensor's input and output are the same memory or apart, and no two tensors'
// memory overlaps: then a transport may read and write the tensors in any order.
bool Disjoint(const std::vector<const TensorView*>& tensors, size_t element) {
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;  // [begin, end)
  for (const TensorView* t : tensors) {
    const uintptr_t bytes = static_cast<uintptr_t>(ElementCount(t->shape)) * element;
    if (bytes == 0) continue;
    const uintptr_t in = reinterpret_cast<uintptr_t>(t->input);
    const uintptr_t out = reinterpret_cast<uintptr_t>(t->output);
    ranges.emplace_back(out, out + bytes);
    if (in != out) ranges.emplace_back(in, in + bytes);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) return false;
  }
  return true;
}

std::vector<int64_t> Times(const std::vector<int64_t>& rows, int64_t factor) {
  std::vector<int64_t> result;
  for (int64_t r : rows) result.push_back(r * factor);
  return result;
}

}  // namespace

Status CollectiveExecutor::Device(gpu::DeviceExecutor** device) {
  if (!device_) {
    Status s = gpu::DeviceExecutor::Create(transport_, sets_, rank_, &device_);
    if (!s.ok()) return s;
  }
  *device = device_.get();
  return Status::OK();
}

Status CollectiveExecutor::Execute(const Response& response, const PendingOp& op) {
  const auto start = Timeline::Clock::now();
  Status s;
  gpu::DeviceExecutor* device = nullptr;
  if (!op.device.on_device()) {
    s = ExecuteOnHost(response, op);
  } else if ((s = Device(&device)).ok()) {
    s = device->Execute(response, op,
                        [&](const PendingOp& host) { return ExecuteOnHost(response, host); });
  }
  if (response.collective != Collective::kAllreduce) {
    Trace({&op}, CollectiveName(response.collective), start);
  }
  if (s.ok()) return s;
  return Status(s.code(), std::string(CollectiveName(response.collective)) + " of tensor '" +
                              op.meta.name + "' failed: " + s.message());
}

Status CollectiveExecutor::ExecuteOnHost(const Response& response, const PendingOp& op) {
  const int set_size = sets_->Size(response.process_set);
  const int set_rank = sets_->RankIn(response.process_set, rank_);
  Status s;
  switch (response.collective) {
    case Collective::kAllreduce: s = Allreduce(response, op, set_size); break;
    case Collective::kAllgather: s = Allgather(response, op, set_size); break;
    case Collective::kBroadcast: s = Broadcast(response, op); break;
    case Collective::kAlltoall: s = Alltoall(response, op, set_size, set_rank); break;
    case Collective::kReducescatter: s = Reducescatter(response, op, set_size, set_rank); break;
    case Collective::kBarrier: s = transport_->Barrier(response.process_set); break;
    case Collective::kJoin:
      if (op.result != nullptr) *op.result = response.join_result;
      break;
    case Collective::kAddProcessSet: s = AddProcessSet(op); break;
    case Collective::kRemoveProcessSet: s = RemoveProcessSet(op); break;
  }
  return s;
}

Status CollectiveExecutor::ExecuteJoined(const Response& response) {
  // One fused reduction over all the request's tensors, like the ranks that submitted it.
  int64_t total = 0;
  for (int64_t count : response.counts) total += count;
  const size_t bytes = total * DtypeSize(response.dtype);
  char* zeros = Scratch(bytes);
  std::memset(zeros, 0, bytes);
  if (response.reduce_op == TUTTI_REDUCE_ADASUM) {
    // A zero vector leaves its partner unchanged, so the joined rank adds nothing.
    return Adasum(response.process_set, zeros, response.dtype, response.counts);
  }
  return transport_->Allreduce(response.process_set, zeros, total, response.dtype,
                                WireOp(response.reduce_op));
}

Status CollectiveExecutor::Allreduce(const Response& response, const PendingOp& op,
                                     int set_size) {
  (void)set_size;
  return ExecuteFusedAllreduce(response.process_set, {&op});
}

Status CollectiveExecutor::ExecuteFusedAllreduce(int32_t set,
                                                 const std::vector<const PendingOp*>& ops) {
  using Clock = Timeline::Clock;
  if (ops[0]->device.on_device()) {  // the fusion plan keeps each group on one device
    gpu::DeviceExecutor* device = nullptr;
    Status s = Device(&device);
    if (!s.ok()) return s;
    return device->Allreduce(set, ops, [this](int32_t host_set,
                                              const std::vector<const PendingOp*>& host_ops) {
      return ExecuteFusedAllreduce(host_set, host_ops);
    });
  }
  const RequestMeta& meta = ops[0]->meta;  // dtype, op and scales agree across the group
  const int set_size = sets_->Size(set);
  const size_t element = DtypeSize(meta.dtype);
  const bool average = meta.reduce_op == TUTTI_REDUCE_AVERAGE;
  std::vector<const TensorView*> tensors;
  for (const PendingOp* op : ops) {
    for (const TensorView& t : op->tensors) tensors.push_back(&t);
  }
  int64_t total = 0;
  for (const TensorView* t : tensors) total += ElementCount(t->shape);
  const size_t total_bytes = total * element;
  if (meta.reduce_op != TUTTI_REDUCE_ADASUM && meta.prescale == 1.0 &&
      transport_->ReducesSpans(set) && Disjoint(tensors, element)) {
    // The transport reads the inputs and writes the outputs chunk by chunk (shared memory):
    // no fusion buffer, no copy in or out, the scaling done on each chunk while it is hot.
    std::vector<AllreduceSpan> spans;
    spans.reserve(tensors.size());
    for (const TensorView* t : tensors) {
      spans.push_back({t->input, t->output, ElementCount(t->shape)});
    }
    const auto start = Clock::now();
    Status s = transport_->AllreduceSpans(set, spans, meta.dtype, WireOp(meta.reduce_op),
                                           meta.postscale, average ? set_size : 1);
    Trace(ops, "allreduce", start,
          "\"tensors\": " + std::to_string(tensors.size()) + ", \"bytes\": " +
              std::to_string(total_bytes));
    counters_->Add(kAllreduceCollectives);
    counters_->Add(kAllreduceBytes, static_cast<int64_t>(total_bytes));
    if (tensors.size() > 1) {
      counters_->Add(kFusedTensors, static_cast<int64_t>(tensors.size()));
      counters_->Add(kFusedBytes, static_cast<int64_t>(total_bytes));
    }
    return s;
  }
  // One tensor reduces in its own output; several are packed into the fusion buffer so the
  // transport runs one collective for all of them.
  const bool fused = tensors.size() > 1;
  char* buffer = static_cast<char*>(tensors[0]->output);
  if (fused) {
    // The transport's own memory when it offers some (shared memory reduces it in place).
    buffer = static_cast<char*>(transport_->FusionBuffer(set, total_bytes));
    if (buffer == nullptr) buffer = FusionBuffer(total_bytes);
  }
  auto start = Clock::now();
  size_t offset = 0;
  for (const TensorView* t : tensors) {
    const size_t bytes = ElementCount(t->shape) * element;
    if (bytes > 0 && buffer + offset != t->input) std::memmove(buffer + offset, t->input, bytes);
    offset += bytes;
  }
  ScaleInPlace(meta.dtype, buffer, total, meta.prescale);
  if (fused) Trace(ops, "fusion_copy_in", start);
  start = Clock::now();
  Status s;
  if (meta.reduce_op == TUTTI_REDUCE_ADASUM) {
    std::vector<int64_t> counts;  // Adasum combines each tensor separately
    for (const TensorView* t : tensors) counts.push_back(ElementCount(t->shape));
    s = Adasum(set, buffer, meta.dtype, counts);
  } else {
    s = transport_->Allreduce(set, buffer, total, meta.dtype, WireOp(meta.reduce_op));
  }
  Trace(ops, "allreduce", start,
        "\"tensors\": " + std::to_string(tensors.size()) + ", \"bytes\": " +
            std::to_string(total_bytes));
  counters_->Add(kAllreduceCollectives);
  counters_->Add(kAllreduceBytes, static_cast<int64_t>(total_bytes));
  if (fused) {
    counters_->Add(kFusedTensors, static_cast<int64_t>(tensors.size()));
    counters_->Add(kFusedBytes, static_cast<int64_t>(total_bytes));
  }
  if (!s.ok()) return s;
  start = Clock::now();
  ScaleInPlace(meta.dtype, buffer, total, meta.postscale, average ? set_size : 1);
  if (!fused) return Status::OK();
  offset = 0;
  for (const TensorView* t : tensors) {
    const size_t bytes = ElementCount(t->shape) * element;
    if (bytes > 0) std::memcpy(t->output, buffer + offset, bytes);
    offset += bytes;
  }
  Trace(ops, "fusion_copy_out", start);
  return Status::OK();
}

Status CollectiveExecutor::Allgather(const Response& response, const PendingOp& op,
                                     int set_size) {
  const size_t element = DtypeSize(op.meta.dtype);
  for (size_t i = 0; i < op.tensors.size(); ++i) {
    const TensorView& t = op.tensors[i];
    std::vector<int64_t> rows(response.sizes.begin() + i * set_size,
                              response.sizes.begin() + (i + 1) * set_size);
    std::vector<int64_t> shape = t.shape;
    shape[0] = 0;
    for (int64_t r : rows) shape[0] += r;
    const int64_t row = RowElements(t.shape);
    void* output;
    Status s = Allocate(op, static_cast<int>(i), shape, ElementCount(shape) * element, &output);
    if (s.ok()) {
      s = transport_->Allgatherv(response.process_set, t.input, output, Times(rows, row),
                                  element);
    }
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status CollectiveExecutor::Broadcast(const Response& response, const PendingOp& op) {
  const TensorView& t = op.tensors[0];
  const int64_t bytes = ElementCount(t.shape) * DtypeSize(op.meta.dtype);
  if (t.output != t.input && bytes > 0) std::memmove(t.output, t.input, bytes);
  return transport_->Broadcast(response.process_set, t.output, bytes, op.meta.root_rank);
}

Status CollectiveExecutor::Alltoall(const Response& response, const PendingOp& op, int set_size,
                                    int set_rank) {
  const TensorView& t = op.tensors[0];
  const size_t element = DtypeSize(op.meta.dtype);
  std::vector<int64_t> sent(response.sizes.begin() + set_rank * set_size,
                            response.sizes.begin() + (set_rank + 1) * set_size);
  std::vector<int64_t> received = ReceivedSplits(response.sizes, set_size, set_rank);
  std::vector<int64_t> shape = t.shape;
  shape[0] = 0;
  for (int64_t r : received) shape[0] += r;
  const int64_t row = RowElements(t.shape);
  void* output;
  Status s = Allocate(op, 0, shape, ElementCount(shape) * element, &output);
  if (s.ok()) {
    s = transport_->Alltoallv(response.process_set, t.input, Times(sent, row), output,
                               Times(received, row), element);
  }
  if (s.ok() && op.received_splits != nullptr) {
    for (int i = 0; i < set_size; ++i) op.received_splits[i] = static_cast<int32_t>(received[i]);
  }
  return s;
}

Status CollectiveExecutor::Reducescatter(const Response& response, const PendingOp& op,
                                         int set_size, int set_rank) {
  const RequestMeta& meta = op.meta;
  const size_t element = DtypeSize(meta.dtype);
  const bool average = meta.reduce_op == TUTTI_REDUCE_AVERAGE;
  for (size_t i = 0; i < op.tensors.size(); ++i) {
    const TensorView& t = op.tensors[i];
    const std::vector<int64_t> rows = ReducescatterRows(t.shape[0], set_size);
    std::vector<int64_t> shape = t.shape;
    shape[0] = rows[set_rank];
    const int64_t count = ElementCount(t.shape);
    const int64_t out_count = ElementCount(shape);
    void* output;
    Status s = Allocate(op, static_cast<int>(i), shape, out_count * element, &output);
    if (!s.ok()) return s;
    // The reduction works on a copy: the input stays untouched and the transport may clobber it.
    char* work = Scratch(count * element);
    if (count > 0) std::memcpy(work, t.input, count * element);
    ScaleInPlace(meta.dtype, work, count, meta.prescale);
    s = transport_->ReduceScatter(response.process_set, set_rank, work,
                                   Times(rows, RowElements(t.shape)), output, meta.dtype,
                                   WireOp(meta.reduce_op));
    if (!s.ok()) return s;
    ScaleInPlace(meta.dtype, output, out_count, meta.postscale, average ? set_size : 1);
  }
  return Status::OK();
}

Status CollectiveExecutor::AddProcessSet(const PendingOp& op) {
  std::vector<int32_t> ranks(op.meta.shapes[0].begin(), op.meta.shapes[0].end());
  const int32_t id = sets_->Add(ranks);
  Status s = transport_->AddProcessSet(id, ranks);
  if (!s.ok()) {
    sets_->Remove(id);
    return s;
  }
  if (op.result != nullptr) *op.result = id;
  return Status::OK();
}

Status CollectiveExecutor::RemoveProcessSet(const PendingOp& op) {
  const int32_t id = static_cast<int32_t>(op.meta.shapes[0][0]);
  if (!sets_->Remove(id)) {
    return Status::InvalidArgument("process set " + std::to_string(id) + " is unknown");
  }
  transport_->RemoveProcessSet(id);
  if (device_) device_->ForgetProcessSet(id);
  return Status::OK();
}

Status CollectiveExecutor::Allocate(const PendingOp& op, int index,
                                    const std::vector<int64_t>& shape, int64_t bytes,
                                    void** data) {
  *data = op.allocate(op.user_data, index, static_cast<int32_t>(shape.size()), shape.data());
  if (*data == nullptr && bytes > 0) {
    return Status::Internal("the allocate callback returned NULL for output " +
                            std::to_string(index));
  }
  return Status::OK();
}

Status CollectiveExecutor::Adasum(int32_t set, void* buffer, tutti_dtype dtype,
                                  const std::vector<int64_t>& counts) {
  const int set_size = sets_->Size(set);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const size_t bytes = total * DtypeSize(dtype);
  if (adasum_scratch_.size() < bytes) adasum_scratch_.resize(bytes);
  auto exchange = [&](int peer, const void* send, int64_t send_bytes, void* recv,
                      int64_t recv_bytes) {
    return transport_->SendRecv(set, set_size, peer, send, send_bytes, recv, recv_bytes);
  };
  return adasum::Allreduce(sets_->RankIn(set, rank_), set_size, dtype, buffer, counts,
                           adasum_scratch_.data(), exchange);
}

char* CollectiveExecutor::FusionBuffer(size_t bytes) {
  if (fusion_.size() < bytes) fusion_.resize(bytes);
  return fusion_.data();
}

void CollectiveExecutor::Trace(const std::vector<const PendingOp*>& ops, const char* what,
                               Timeline::Clock::time_point start, const std::string& args) {
  if (!timeline_->active()) return;
  const auto end = Timeline::Clock::now();
  for (const PendingOp* op : ops) timeline_->Span(op->meta.name, what, start, end, args);
}

char* CollectiveExecutor::Scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

}  // namespace tutti
