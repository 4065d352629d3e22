// The GPU settings (TUTTI_* first, then HOROVOD_*), read when the first CUDA request runs.
#ifndef TUTTI_SRC_GPU_GPU_CONFIG_H_
#define TUTTI_SRC_GPU_GPU_CONFIG_H_

#include "base/config.h"
#include "base/status.h"

namespace tutti {
namespace gpu {

enum class GpuOperations {
  kNccl,    // NCCL where it loads and can run the request, else staged
  kStaged,  // always staged through pinned host buffers over the controller's transport
};

struct GpuConfig {
  // TUTTI_GPU_OPERATIONS: nccl (default) | mpi | gloo; mpi and gloo both stage through the
  // controller in use (its transport decides how the host buffers travel).
  GpuOperations operations = GpuOperations::kNccl;
  // TUTTI_NUM_NCCL_STREAMS (1..64): streams, each with its own communicator, per device;
  // consecutive collectives take them in turn so that they may overlap.
  int num_nccl_streams = 1;
};

// Every malformed value is an INVALID_ARGUMENT naming the variable.
Status ParseGpuConfig(const EnvLookup& env, GpuConfig* config);

}  // namespace gpu
}  // namespace tutti

#endif  // TUTTI_SRC_GPU_GPU_CONFIG_H_
