#include "gpu/staged_operations.h"

#include <memory>
#include <string>

#include "base/collective_plan.h"
#include "base/dtype.h"

namespace tutti {
namespace gpu {
namespace {

// Staging slots start on cache lines.
constexpr size_t kStagingAlignment = 64;

std::vector<size_t> TensorBytes(const std::vector<const PendingOp*>& ops) {
  std::vector<size_t> bytes;
  for (const PendingOp* op : ops) {
    for (const TensorView& t : op->tensors) {
      bytes.push_back(static_cast<size_t>(ElementCount(t.shape)) * DtypeSize(op->meta.dtype));
    }
  }
  return bytes;
}

// Outputs the core allocates (allgather, alltoall, reducescatter): the host collective writes
// into host memory, the request's own allocate callback provides the device memory.
struct StagedAllocation {
  const PendingOp* op = nullptr;
  struct Output {
    void* device = nullptr;
    std::vector<char> host;
  };
  std::vector<Output> outputs;
};

void* AllocateStaged(void* user_data, int32_t index, int32_t ndim, const int64_t* shape) {
  auto* staged = static_cast<StagedAllocation*>(user_data);
  void* device = staged->op->allocate(staged->op->user_data, index, ndim, shape);
  if (device == nullptr) return nullptr;
  int64_t count = 1;
  for (int32_t i = 0; i < ndim; ++i) count *= shape[i];
  if (staged->outputs.size() <= static_cast<size_t>(index)) staged->outputs.resize(index + 1);
  StagedAllocation::Output& out = staged->outputs[index];
  out.device = device;
  out.host.assign(static_cast<size_t>(count) * DtypeSize(staged->op->meta.dtype) + 1, 0);
  return out.host.data();
}

}  // namespace

PackedLayout PlanStaging(const std::vector<const PendingOp*>& ops) {
  return PackTensors(TensorBytes(ops), kStagingAlignment);
}

StagedOperations::~StagedOperations() {
  for (auto& entry : pinned_) runtime_->FreePinned(entry.second.data);
}

char* StagedOperations::Pinned(int device, size_t bytes, Status* status) {
  Buffer& buffer = pinned_[device];
  if (buffer.bytes < bytes || buffer.data == nullptr) {
    runtime_->FreePinned(buffer.data);
    buffer = Buffer();
    void* data = nullptr;
    *status = runtime_->AllocatePinned(bytes > 0 ? bytes : 1, &data);
    if (!status->ok()) return nullptr;
    buffer.data = data;
    buffer.bytes = bytes;
  }
  return static_cast<char*>(buffer.data);
}

Status WaitForInputs(DeviceRuntime* runtime, void* stream,
                     const std::vector<const PendingOp*>& ops) {
  for (const PendingOp* op : ops) {
    if (op->device.ready_event == nullptr) continue;
    Status s = runtime->WaitEvent(stream, op->device.ready_event);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status FinishOnStream(DeviceRuntime* runtime, void* stream,
                      const std::vector<const PendingOp*>& ops) {
  bool synchronize = false;
  for (const PendingOp* op : ops) {
    if (op->device.done_event == nullptr) {
      synchronize = true;
      continue;
    }
    Status s = runtime->RecordEvent(op->device.done_event, stream);
    if (!s.ok()) return s;
  }
  return synchronize ? runtime->Synchronize(stream) : Status::OK();
}

Status StagedOperations::Run(const std::vector<const PendingOp*>& ops, const HostRun& host_run) {
  const int device = ops[0]->device.index;
  Status s = runtime_->SetDevice(device);
  void* stream = nullptr;
  if (s.ok()) s = runtime_->Stream(device, 0, &stream);
  if (s.ok()) s = WaitForInputs(runtime_, stream, ops);
  if (!s.ok()) return s;

  // Device -> host, then wait: the host collective reads the copies.
  const std::vector<size_t> bytes = TensorBytes(ops);
  const PackedLayout layout = PackTensors(bytes, kStagingAlignment);
  char* pinned = Pinned(device, layout.total_bytes, &s);
  if (pinned == nullptr) return s;
  std::vector<const void*> sources;
  for (const PendingOp* op : ops) {
    for (const TensorView& t : op->tensors) sources.push_back(t.input);
  }
  s = runtime_->Copy(stream, CopiesIn(layout, sources, bytes, pinned));
  if (s.ok()) s = runtime_->Synchronize(stream);
  if (!s.ok()) return s;

  // The same requests on host memory.
  std::vector<PendingOp> host_ops;
  std::vector<std::unique_ptr<StagedAllocation>> allocations;
  std::vector<void*> given_outputs;  // device outputs of allreduce and broadcast, by slot
  size_t slot = 0;
  for (const PendingOp* op : ops) {
    PendingOp host = *op;
    host.device = DeviceSpec();
    host.done = nullptr;
    for (TensorView& t : host.tensors) {
      char* staged = pinned + layout.offsets[slot++];
      given_outputs.push_back(t.output);
      t.input = staged;
      if (t.output != nullptr) t.output = staged;
    }
    if (op->allocate != nullptr) {
      allocations.emplace_back(new StagedAllocation());
      allocations.back()->op = op;
      host.allocate = &AllocateStaged;
      host.user_data = allocations.back().get();
    }
    host_ops.push_back(std::move(host));
  }
  std::vector<const PendingOp*> host_pointers;
  for (const PendingOp& host : host_ops) host_pointers.push_back(&host);
  s = host_run(host_pointers);
  if (!s.ok()) return s;

  // Host -> device, ordered before each done event on the same stream.
  std::vector<CopyItem> copies;
  for (size_t i = 0; i < given_outputs.size(); ++i) {
    if (given_outputs[i] == nullptr || bytes[i] == 0) continue;
    copies.push_back({given_outputs[i], pinned + layout.offsets[i], bytes[i]});
  }
  for (const auto& allocation : allocations) {
    for (const StagedAllocation::Output& out : allocation->outputs) {
      if (out.device != nullptr && out.host.size() > 1) {
        copies.push_back({out.device, out.host.data(), out.host.size() - 1});
      }
    }
  }
  s = runtime_->Copy(stream, copies);
  if (!s.ok()) return s;
  // Pageable sources (the allocated outputs' host copies) are released below: make sure the
  // copies have read them.
  if (!allocations.empty()) {
    s = runtime_->Synchronize(stream);
    if (!s.ok()) return s;
  }
  return FinishOnStream(runtime_, stream, ops);
}

}  // namespace gpu
}  // namespace tutti
