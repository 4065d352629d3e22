#include "gpu/device_requests.h"

#include "base/collective_plan.h"
#include "base/dtype.h"

namespace tutti {
namespace gpu {

FlatTensors Flatten(const std::vector<const PendingOp*>& ops) {
  FlatTensors flat;
  for (const PendingOp* op : ops) {
    const size_t element = DtypeSize(op->meta.dtype);
    for (const TensorView& t : op->tensors) {
      flat.inputs.push_back(t.input);
      flat.outputs.push_back(t.output);
      flat.bytes.push_back(static_cast<size_t>(ElementCount(t.shape)) * element);
    }
  }
  return flat;
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

}  // namespace gpu
}  // namespace tutti
