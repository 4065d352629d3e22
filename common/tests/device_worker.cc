// Multi-process check of the device path through the C ABI, on machines without a GPU:
// run with TUTTI_DEVICE_RUNTIME=host, where host memory stands in for CUDA memory and the
// staged path (device -> pinned host -> transport -> device) runs for real over MPI or Gloo.
//   device_worker NP [staged|bad-config|no-cudart]
// staged: fused allreduces of every dtype and op on "CUDA" tensors submitted together with CPU
//   tensors (mixed in one job, never fused together); the device type negotiated (a rank
//   submitting on CPU what the others submit on CUDA fails everywhere, naming the ranks);
//   malformed tutti_device values refused at enqueue with their messages.
// bad-config: TUTTI_GPU_OPERATIONS is malformed; the first CUDA request fails naming it.
// no-cudart: the real CUDA runtime is required (no TUTTI_DEVICE_RUNTIME) and
//   TUTTI_CUDART_LIBRARY points at a missing file; enqueue fails saying what was tried.
#include <cstdlib>

#include "worker_util.h"

using namespace worker;

namespace {

int rank_ = 0, size_ = 1;
int ready_token = 0, done_token = 0;

tutti_device Cuda() {
  return {sizeof(tutti_device), TUTTI_DEVICE_CUDA, 0, &ready_token, &done_token};
}

struct Tensor {
  std::vector<float> data;
  int64_t shape[1];
  tutti_tensor view;
  Call call;
  explicit Tensor(size_t n, float value) : data(n, value) {
    shape[0] = static_cast<int64_t>(n);
    view = {data.data(), TUTTI_FLOAT32, 1, shape};
  }
};

tutti_status Submit(const char* name, Tensor* t, const tutti_device* device,
                    tutti_reduce_op op = TUTTI_REDUCE_SUM) {
  tutti_request r = Request(name, TUTTI_OP_ALLREDUCE, &t->call);
  r.num_tensors = 1;
  r.inputs = r.outputs = &t->view;
  r.reduce_op = op;
  return tutti_enqueue_on_device(&r, device);
}

void CheckMixedAndFused() {
  // 8 CUDA and 8 CPU tensors in one burst: each device's tensors fuse among themselves.
  std::vector<std::unique_ptr<Tensor>> tensors;
  tutti_device cuda = Cuda();
  for (int i = 0; i < 16; ++i) {
    tensors.emplace_back(new Tensor(100 + i, static_cast<float>(rank_ + i)));
    const std::string name = "mixed." + std::to_string(i);
    CHECK(Submit(name.c_str(), tensors.back().get(), i % 2 ? &cuda : nullptr) == TUTTI_OK,
          "enqueue %s: %s", name.c_str(), tutti_last_error());
  }
  const float rank_sum = size_ * (size_ - 1) / 2.0f;
  for (int i = 0; i < 16; ++i) {
    Tensor* t = tensors[i].get();
    CHECK(Wait(&t->call) && t->call.status == TUTTI_OK, "mixed.%d: %s", i, t->call.message.c_str());
    const float expected = rank_sum + size_ * i;
    bool all = true;
    for (float v : t->data) all = all && v == expected;
    CHECK(all, "mixed.%d: %g, expected %g", i, t->data[0], expected);
  }
  // AVERAGE and MAX on the device path.
  Tensor avg(10, static_cast<float>(rank_)), max(10, static_cast<float>(rank_));
  CHECK(Submit("cuda.avg", &avg, &cuda, TUTTI_REDUCE_AVERAGE) == TUTTI_OK, "avg");
  CHECK(Submit("cuda.max", &max, &cuda, TUTTI_REDUCE_MAX) == TUTTI_OK, "max");
  CHECK(Wait(&avg.call) && avg.data[9] == (size_ - 1) / 2.0f, "avg: %g", avg.data[9]);
  CHECK(Wait(&max.call) && max.data[0] == size_ - 1, "max: %g", max.data[0]);
}

void CheckDeviceMismatch() {
  // Rank 0 submits on CPU what the others submit on CUDA: one error on every rank.
  Tensor t(4, 1.0f);
  tutti_device cuda = Cuda();
  CHECK(Submit("device.mismatch", &t, rank_ == 0 ? nullptr : &cuda) == TUTTI_OK, "enqueue");
  CHECK(Wait(&t.call), "mismatch finished");
  CHECK(t.call.status == TUTTI_ERR_PRECONDITION, "status %d", t.call.status);
  std::string others = size_ == 2 ? "rank 1" : "ranks 1";
  for (int r = 2; r < size_; ++r) others += ", " + std::to_string(r);
  CHECK(t.call.message.find("device differs: CPU on rank 0; CUDA on " + others) !=
            std::string::npos,
        "message: %s", t.call.message.c_str());
  std::printf("rank %d sees: %s\n", rank_, t.call.message.c_str());
}

void CheckBadDevices() {
  Tensor t(4, 1.0f);
  tutti_device d = Cuda();
  d.struct_size = 8;
  CHECK(Submit("bad.size", &t, &d) == TUTTI_ERR_INVALID_ARGUMENT &&
            std::string(tutti_last_error()).find("struct_size is 8") != std::string::npos,
        "struct_size: %s", tutti_last_error());
  d = Cuda();
  d.type = static_cast<tutti_device_type>(7);
  CHECK(Submit("bad.type", &t, &d) == TUTTI_ERR_INVALID_ARGUMENT &&
            std::string(tutti_last_error()) == "unknown device type 7 (0: CPU, 1: CUDA)",
        "type: %s", tutti_last_error());
  d = Cuda();
  d.index = -2;
  CHECK(Submit("bad.index", &t, &d) == TUTTI_ERR_INVALID_ARGUMENT &&
            std::string(tutti_last_error()) == "CUDA device index -2 is negative",
        "index: %s", tutti_last_error());
  CHECK(tutti_c_api_minor_version() == TUTTI_C_API_MINOR_VERSION, "minor version");
}

void CheckBadConfig() {
  Tensor t(4, 1.0f);
  tutti_device cuda = Cuda();
  CHECK(Submit("bad.config", &t, &cuda) == TUTTI_OK, "enqueue: %s", tutti_last_error());
  CHECK(Wait(&t.call) && t.call.status == TUTTI_ERR_INVALID_ARGUMENT, "status %d",
        t.call.status);
  CHECK(t.call.message.find("TUTTI_GPU_OPERATIONS='fast' is not one of: nccl, mpi, gloo") !=
            std::string::npos,
        "message: %s", t.call.message.c_str());
  std::printf("rank %d sees: %s\n", rank_, t.call.message.c_str());
}

void CheckNoCudart() {
  Tensor t(4, 1.0f);
  tutti_device cuda = Cuda();
  CHECK(Submit("no.cudart", &t, &cuda) == TUTTI_ERR_UNSUPPORTED, "status");
  const std::string message = tutti_last_error();
  CHECK(message.find("a CUDA tensor arrived, but tutti cannot load the CUDA runtime "
                     "(libcudart); tried:\n  /nonexistent/libcudart.so.13: ") == 0 &&
            message.find("set TUTTI_CUDART_LIBRARY to the library's path") != std::string::npos,
        "message: %s", message.c_str());
  CHECK(tutti_built("cuda") == 0, "cuda_built with a missing runtime");
  std::printf("rank %d sees: %s\n", rank_, message.c_str());
  // CPU tensors are unaffected.
  Tensor cpu(4, 1.0f);
  CHECK(Submit("cpu.still.works", &cpu, nullptr) == TUTTI_OK && Wait(&cpu.call) &&
            cpu.data[0] == size_,
        "cpu allreduce");
}

}  // namespace

int main(int argc, char** argv) {
  const int expected_size = argc > 1 ? std::atoi(argv[1]) : 0;
  const std::string mode = argc > 2 ? argv[2] : "staged";
  CHECK(tutti_init() == TUTTI_OK, "init: %s", tutti_last_error());
  rank_ = my_rank = tutti_rank();
  size_ = tutti_size();
  if (expected_size > 0) CHECK(size_ == expected_size, "size %d", size_);
  if (mode == "staged") {
    CheckMixedAndFused();
    if (size_ > 1) CheckDeviceMismatch();
    CheckBadDevices();
    CheckMixedAndFused();  // the cache path, after the first round was negotiated
  } else if (mode == "bad-config") {
    CheckBadConfig();
  } else if (mode == "no-cudart") {
    CheckNoCudart();
  } else {
    CHECK(false, "unknown mode %s", mode.c_str());
  }
  CHECK(tutti_shutdown() == TUTTI_OK, "shutdown");
  return Finish();
}
