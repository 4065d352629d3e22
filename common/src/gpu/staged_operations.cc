#include "gpu/staged_operations.h"

#include <memory>
#include <string>

#include "base/dtype.h"

namespace tutti {
namespace gpu {
namespace {

// Staging slots start on cache lines.
constexpr size_t kStagingAlignment = 64;

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
  return PackTensors(Flatten(ops).bytes, kStagingAlignment);
}

StagedOperations::StagedOperations(DeviceRuntime* runtime)
    : runtime_(runtime),
      pinned_([runtime](int, size_t bytes, void** data) {
                return runtime->AllocatePinned(bytes > 0 ? bytes : 1, data);
              },
              [runtime](void* data) { runtime->FreePinned(data); }) {}

Status StagedOperations::Run(const std::vector<const PendingOp*>& ops, const HostRun& host_run) {
  const int device = ops[0]->device.index;
  Status s = runtime_->SetDevice(device);
  void* stream = nullptr;
  if (s.ok()) s = runtime_->Stream(device, 0, &stream);
  if (s.ok()) s = WaitForInputs(runtime_, stream, ops);
  if (!s.ok()) return s;

  // Device -> host, then wait: the host collective reads the copies.
  const FlatTensors flat = Flatten(ops);
  const std::vector<size_t>& bytes = flat.bytes;
  const PackedLayout layout = PackTensors(bytes, kStagingAlignment);
  char* pinned = pinned_.Get(device, layout.total_bytes, &s);
  if (pinned == nullptr) return s;
  s = runtime_->Copy(stream, CopiesIn(layout, flat.inputs, bytes, pinned));
  if (s.ok()) s = runtime_->Synchronize(stream);
  if (!s.ok()) return s;

  // The same requests on host memory.
  std::vector<PendingOp> host_ops;
  std::vector<std::unique_ptr<StagedAllocation>> allocations;
  size_t slot = 0;
  for (const PendingOp* op : ops) {
    PendingOp host = *op;
    host.device = DeviceSpec();
    host.done = nullptr;
    for (TensorView& t : host.tensors) {
      char* staged = pinned + layout.offsets[slot++];
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
  // Device outputs of allreduce and broadcast, by slot.
  for (size_t i = 0; i < flat.outputs.size(); ++i) {
    if (flat.outputs[i] == nullptr || bytes[i] == 0) continue;
    copies.push_back({flat.outputs[i], pinned + layout.offsets[i], bytes[i]});
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
