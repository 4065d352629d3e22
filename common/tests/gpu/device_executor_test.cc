// The device executor's stream and event ordering, exercised on the CPU through HostRuntime
// (host memory standing in for device memory, every operation logged in issue order), and the
// strategy chain's choice between NCCL and the staged path.
#include "gpu/device_executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

namespace tutti {
namespace gpu {
namespace {

int ready_a, ready_b, done_a, done_b;  // event tokens

PendingOp DeviceOp(const std::string& name, Collective collective, std::vector<float>* data,
                   void* ready, void* done) {
  PendingOp op;
  op.meta.name = name;
  op.meta.collective = collective;
  op.meta.dtype = TUTTI_FLOAT32;
  op.meta.device = TUTTI_DEVICE_CUDA;
  op.device.type = TUTTI_DEVICE_CUDA;
  op.device.index = 0;
  op.device.ready_event = ready;
  op.device.done_event = done;
  TensorView t;
  t.input = data->data();
  t.output = collective == Collective::kAllgather ? nullptr : data->data();
  t.shape = {static_cast<int64_t>(data->size())};
  op.tensors.push_back(t);
  return op;
}

std::string Hex(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

class StagedOrder : public ::testing::Test {
 protected:
  StagedOrder()
      : transport_(CreateLocalTransport()),
        sets_(1),
        executor_(transport_.get(), &sets_, 0, GpuConfig(),
                  std::unique_ptr<DeviceRuntime>(runtime_ = new HostRuntime()), nullptr) {}
  std::unique_ptr<Transport> transport_;
  ProcessSetRegistry sets_;
  HostRuntime* runtime_;
  DeviceExecutor executor_;
};

TEST_F(StagedOrder, FusedAllreduceWaitsCopiesRunsCopiesBackThenRecords) {
  std::vector<float> a = {1, 2, 3}, b = {10, 20};
  PendingOp op_a = DeviceOp("a", Collective::kAllreduce, &a, &ready_a, &done_a);
  PendingOp op_b = DeviceOp("b", Collective::kAllreduce, &b, &ready_b, &done_b);
  std::vector<std::string> at_host_call;
  Status s = executor_.Allreduce(
      0, {&op_a, &op_b}, [&](int32_t set, const std::vector<const PendingOp*>& host) {
        EXPECT_EQ(set, 0);
        at_host_call = runtime_->log();
        // The host collective sees host copies (not the device pointers) and no device.
        EXPECT_EQ(host.size(), 2u);
        for (const PendingOp* op : host) {
          EXPECT_FALSE(op->device.on_device());
          float* staged = static_cast<float*>(op->tensors[0].output);
          EXPECT_EQ(op->tensors[0].input, staged);
          EXPECT_NE(staged, op->meta.name == "a" ? a.data() : b.data());
          for (int64_t i = 0; i < op->tensors[0].shape[0]; ++i) staged[i] *= 2;
        }
        return Status::OK();
      });
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(a, (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(b, (std::vector<float>{20, 40}));
  const std::vector<std::string> expected = {
      "device 0",
      "wait s0.0 e:" + Hex(&ready_a),
      "wait s0.0 e:" + Hex(&ready_b),
      "copy s0.0 x2 20B",  // device -> pinned host, one batch
      "sync s0.0",         // the host collective reads the copies
      "copy s0.0 x2 20B",  // pinned host -> device
      "record s0.0 e:" + Hex(&done_a),
      "record s0.0 e:" + Hex(&done_b),
  };
  EXPECT_EQ(runtime_->log(), expected);
  // Nothing was recorded before the host collective ran; no sync after it: the framework's
  // stream waits on the done events instead.
  EXPECT_EQ(at_host_call, std::vector<std::string>(expected.begin(), expected.begin() + 5));
  EXPECT_EQ(executor_.staged_collectives(), 1);
  EXPECT_EQ(executor_.nccl_collectives(), 0);
}

TEST_F(StagedOrder, WithoutADoneEventTheCoreWaitsForItsStream) {
  std::vector<float> a = {1};
  PendingOp op = DeviceOp("a", Collective::kBroadcast, &a, nullptr, nullptr);
  Response response;
  response.collective = Collective::kBroadcast;
  ASSERT_TRUE(executor_.Execute(response, op, [](const PendingOp&) { return Status::OK(); }).ok());
  const std::vector<std::string> expected = {"device 0", "copy s0.0 x1 4B", "sync s0.0",
                                             "copy s0.0 x1 4B", "sync s0.0"};
  EXPECT_EQ(runtime_->log(), expected);
}

struct DeviceOutputs {
  std::vector<std::vector<float>> buffers;
};

void* AllocateOnDevice(void* user_data, int32_t index, int32_t ndim, const int64_t* shape) {
  auto* outputs = static_cast<DeviceOutputs*>(user_data);
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  outputs->buffers.resize(index + 1);
  outputs->buffers[index].assign(n, -1);
  return outputs->buffers[index].data();
}

TEST_F(StagedOrder, AllocatedOutputsAreFilledOnTheDeviceBeforeDone) {
  std::vector<float> a = {5, 6};
  DeviceOutputs device_outputs;
  PendingOp op = DeviceOp("g", Collective::kAllgather, &a, &ready_a, &done_a);
  op.allocate = &AllocateOnDevice;
  op.user_data = &device_outputs;
  Response response;
  response.collective = Collective::kAllgather;
  Status s = executor_.Execute(response, op, [](const PendingOp& host) {
    // What the host executor does: allocate through the request's callback, then fill.
    const int64_t shape[1] = {4};
    float* out = static_cast<float*>(host.allocate(host.user_data, 0, 1, shape));
    const float* in = static_cast<const float*>(host.tensors[0].input);
    for (int i = 0; i < 4; ++i) out[i] = in[i % 2] + (i / 2) * 100;
    return Status::OK();
  });
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(device_outputs.buffers.at(0), (std::vector<float>{5, 6, 105, 106}));
  EXPECT_EQ(a, (std::vector<float>{5, 6}));  // the input is untouched
  const std::vector<std::string>& log = runtime_->log();
  ASSERT_GE(log.size(), 3u);
  EXPECT_EQ(log[log.size() - 3], "copy s0.0 x1 16B");  // host result -> device output
  EXPECT_EQ(log[log.size() - 2], "sync s0.0");         // before its host copy is released
  EXPECT_EQ(log.back(), "record s0.0 e:" + Hex(&done_a));
}

TEST_F(StagedOrder, AHostFailureRecordsNothing) {
  std::vector<float> a = {1};
  PendingOp op = DeviceOp("a", Collective::kAllreduce, &a, nullptr, &done_a);
  Status s = executor_.Allreduce(0, {&op}, [](int32_t, const std::vector<const PendingOp*>&) {
    return Status::Aborted("peer left");
  });
  EXPECT_EQ(s.code(), TUTTI_ERR_ABORTED);
  for (const std::string& line : runtime_->log()) EXPECT_EQ(line.find("record"), std::string::npos);
}

// NCCL's part of the strategy chain: which requests it takes (the rest are staged).
TEST(NcclEnabled, DecidedFromNegotiatedFacts) {
  NcclApi api;  // never called by Enabled
  HostRuntime runtime;
  std::unique_ptr<Transport> transport = CreateLocalTransport();
  ProcessSetRegistry sets(1);
  GpuConfig config;
  NcclOperations nccl(&api, &runtime, transport.get(), &sets, 0, config);
  std::vector<float> data = {1};
  PendingOp op = DeviceOp("x", Collective::kAllreduce, &data, nullptr, nullptr);
  Response r;
  r.collective = Collective::kAllreduce;
  std::string why;
  EXPECT_TRUE(nccl.Enabled(r, op, &why));
  op.meta.reduce_op = TUTTI_REDUCE_MAX;
  op.meta.prescale = 2;
  EXPECT_FALSE(nccl.Enabled(r, op, &why));
  EXPECT_EQ(why, "NCCL cannot scale a MIN, MAX or PRODUCT");
  op.meta.prescale = 1;
  op.meta.dtype = TUTTI_INT16;
  EXPECT_FALSE(nccl.Enabled(r, op, &why));
  op.meta.dtype = TUTTI_FLOAT32;
  r.joined_ranks = {0};
  EXPECT_FALSE(nccl.Enabled(r, op, &why));
  EXPECT_EQ(why, "joined ranks take part with host zeros");
  r.joined_ranks.clear();
  for (Collective c : {Collective::kAllgather, Collective::kBroadcast, Collective::kAlltoall}) {
    r.collective = c;
    op.meta.dtype = TUTTI_INT16;  // data movement is bytes: any dtype
    EXPECT_TRUE(nccl.Enabled(r, op, &why)) << CollectiveName(c);
  }
  r.collective = Collective::kBarrier;
  EXPECT_FALSE(nccl.Enabled(r, op, &why));

  config.operations = GpuOperations::kStaged;
  NcclOperations staged_only(&api, &runtime, transport.get(), &sets, 0, config);
  r.collective = Collective::kBroadcast;
  EXPECT_FALSE(staged_only.Enabled(r, op, &why));
  EXPECT_EQ(why, "TUTTI_GPU_OPERATIONS asks for the staged path");
}

}  // namespace
}  // namespace gpu
}  // namespace tutti
