#include "gpu/device_executor.h"

#include <cstddef>
#include <cstdlib>

namespace tutti {
namespace gpu {

Status DeviceExecutor::Create(Transport* transport, ProcessSetRegistry* sets, int rank,
                              std::unique_ptr<DeviceExecutor>* executor) {
  GpuConfig config;
  Status s = ParseGpuConfig(ProcessEnv(), &config);
  std::unique_ptr<DeviceRuntime> runtime;
  if (s.ok()) s = CreateDeviceRuntime(&runtime);
  if (!s.ok()) return s;
  // NCCL needs real device memory: never with the host runtime.
  const NcclApi* nccl = nullptr;
  if (config.operations == GpuOperations::kNccl && std::string(runtime->name()) == "cuda") {
    nccl = Nccl(nullptr);  // absent: staged, as documented
  }
  executor->reset(
      new DeviceExecutor(transport, sets, rank, config, std::move(runtime), nccl));
  return Status::OK();
}

DeviceExecutor::DeviceExecutor(Transport* transport, ProcessSetRegistry* sets, int rank,
                               const GpuConfig& config, std::unique_ptr<DeviceRuntime> runtime,
                               const NcclApi* nccl)
    : runtime_(std::move(runtime)), staged_(runtime_.get()) {
  if (nccl != nullptr) {
    nccl_.reset(new NcclOperations(nccl, runtime_.get(), transport, sets, rank, config));
  }
}

Status DeviceExecutor::Allreduce(int32_t set, const std::vector<const PendingOp*>& ops,
                                 const HostAllreduce& host) {
  Response response;
  response.collective = Collective::kAllreduce;
  response.process_set = set;
  std::string why_not;
  if (nccl_ && nccl_->Enabled(response, *ops[0], &why_not)) {
    ++nccl_count_;
    return nccl_->Allreduce(set, ops);
  }
  ++staged_count_;
  return staged_.Run(ops, [&](const std::vector<const PendingOp*>& host_ops) {
    return host(set, host_ops);
  });
}

Status DeviceExecutor::Execute(const Response& response, const PendingOp& op,
                               const HostExecute& host) {
  std::string why_not;
  if (nccl_ && nccl_->Enabled(response, op, &why_not)) {
    ++nccl_count_;
    return nccl_->Execute(response, op);
  }
  ++staged_count_;
  return staged_.Run({&op}, [&](const std::vector<const PendingOp*>& host_ops) {
    return host(*host_ops[0]);
  });
}

void DeviceExecutor::ForgetProcessSet(int32_t set) {
  if (nccl_) nccl_->ForgetProcessSet(set);
}

Status AttachDevice(const tutti_device* device, PendingOp* op) {
  if (device == nullptr) return Status::OK();  // host memory
  const size_t minor1_size = offsetof(tutti_device, done_event) + sizeof(void*);
  if (device->struct_size < minor1_size) {
    return Status::InvalidArgument("tutti_device.struct_size is " +
                                   std::to_string(device->struct_size) + "; set it to sizeof(tutti_device) (at least " +
                                   std::to_string(minor1_size) + ")");
  }
  if (device->type == TUTTI_DEVICE_CPU) return Status::OK();
  if (device->type != TUTTI_DEVICE_CUDA) {
    return Status::InvalidArgument("unknown device type " + std::to_string(device->type) +
                                   " (0: CPU, 1: CUDA)");
  }
  if (device->index < 0) {
    return Status::InvalidArgument("CUDA device index " + std::to_string(device->index) +
                                   " is negative");
  }
  const char* runtime = std::getenv("TUTTI_DEVICE_RUNTIME");
  if (runtime == nullptr || std::string(runtime) != "host") {
    std::string error;
    if (Cuda(&error) == nullptr) return Status::Unsupported("a CUDA tensor arrived, but tutti " + error);
  }
  if (op->meta.collective == Collective::kBarrier || op->meta.collective == Collective::kJoin) {
    return Status::OK();  // no tensors: nothing lives on the device
  }
  op->device.type = TUTTI_DEVICE_CUDA;
  op->device.index = device->index;
  op->device.ready_event = device->ready_event;
  op->device.done_event = device->done_event;
  op->meta.device = TUTTI_DEVICE_CUDA;
  return Status::OK();
}

}  // namespace gpu
}  // namespace tutti
