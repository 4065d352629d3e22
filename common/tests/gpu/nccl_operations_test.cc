// The NCCL calls the core makes for each collective, checked without a GPU: NcclOperations
// runs on HostRuntime against a recording stand-in for libnccl's functions (NCCL itself cannot
// run here). Rank 0 of a 3-rank set: communicator creation, fusion copies, reduction ops and
// scalars, grouped calls with their counts and offsets, stream rotation.
#include "gpu/nccl_operations.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace tutti {
namespace gpu {
namespace {

std::vector<std::string> calls;
int comms_created = 0;

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* format, ...) {
  char text[256];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return text;
}

int CommIndex(ncclComm comm) { return static_cast<int>(reinterpret_cast<intptr_t>(comm)); }

NcclApi RecordingNccl() {
  NcclApi api;
  api.GetErrorString = [](ncclResult) { return "recorded failure"; };
  api.GetUniqueId = [](NcclUniqueId* id) {
    std::memset(id->internal, 'x', sizeof id->internal);
    calls.push_back("unique id");
    return kNcclSuccess;
  };
  api.CommInitRank = [](ncclComm* comm, int n, NcclUniqueId id, int rank) {
    *comm = reinterpret_cast<ncclComm>(static_cast<intptr_t>(++comms_created));
    calls.push_back(Format("init comm%d n=%d rank=%d id=%c", comms_created, n, rank, id.internal[0]));
    return kNcclSuccess;
  };
  api.CommDestroy = [](ncclComm comm) {
    calls.push_back(Format("destroy comm%d", CommIndex(comm)));
    return kNcclSuccess;
  };
  api.GroupStart = [] {
    calls.push_back("group {");
    return kNcclSuccess;
  };
  api.GroupEnd = [] {
    calls.push_back("}");
    return kNcclSuccess;
  };
  api.AllReduce = [](const void* send, void* recv, size_t count, int type, int op, ncclComm comm,
                     cudaStream) {
    calls.push_back(Format("allreduce comm%d count=%zu type=%d op=%d %s", CommIndex(comm), count,
                           type, op, send == recv ? "in place" : "out of place"));
    return kNcclSuccess;
  };
  api.Broadcast = [](const void*, void*, size_t count, int type, int root, ncclComm, cudaStream) {
    calls.push_back(Format("broadcast count=%zu type=%d root=%d", count, type, root));
    return kNcclSuccess;
  };
  api.AllGather = [](const void*, void*, size_t count, int type, ncclComm, cudaStream) {
    calls.push_back(Format("allgather count=%zu type=%d", count, type));
    return kNcclSuccess;
  };
  api.ReduceScatter = [](const void*, void*, size_t count, int type, int op, ncclComm, cudaStream) {
    calls.push_back(Format("reducescatter count=%zu type=%d op=%d", count, type, op));
    return kNcclSuccess;
  };
  api.Reduce = [](const void*, void*, size_t count, int type, int op, int root, ncclComm,
                  cudaStream) {
    calls.push_back(Format("reduce count=%zu type=%d op=%d root=%d", count, type, op, root));
    return kNcclSuccess;
  };
  api.Send = [](const void*, size_t count, int, int peer, ncclComm, cudaStream) {
    calls.push_back(Format("send count=%zu peer=%d", count, peer));
    return kNcclSuccess;
  };
  api.Recv = [](void*, size_t count, int, int peer, ncclComm, cudaStream) {
    calls.push_back(Format("recv count=%zu peer=%d", count, peer));
    return kNcclSuccess;
  };
  api.RedOpCreatePreMulSum = [](int* op, void* scalar, int type, int residence, ncclComm) {
    float value;
    std::memcpy(&value, scalar, sizeof value);
    *op = 17;
    calls.push_back(Format("premulsum %g type=%d residence=%d", value, type, residence));
    return kNcclSuccess;
  };
  api.RedOpDestroy = [](int op, ncclComm) {
    calls.push_back(Format("destroy op %d", op));
    return kNcclSuccess;
  };
  return api;
}

struct Allocated {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<char> memory = std::vector<char>(4096);
};

void* Allocate(void* user_data, int32_t, int32_t ndim, const int64_t* shape) {
  auto* allocated = static_cast<Allocated*>(user_data);
  allocated->shapes.emplace_back(shape, shape + ndim);
  return allocated->memory.data();
}

PendingOp Op(tutti_dtype dtype, std::vector<std::vector<int64_t>> shapes, std::vector<char>* data) {
  PendingOp op;
  op.meta.dtype = dtype;
  op.meta.device = TUTTI_DEVICE_CUDA;
  op.device.type = TUTTI_DEVICE_CUDA;
  op.device.index = 0;
  for (const auto& shape : shapes) {
    TensorView t;
    t.input = t.output = data->data();
    t.shape = shape;
    op.tensors.push_back(t);
  }
  return op;
}

class NcclCalls : public ::testing::Test {
 protected:
  NcclCalls() : transport_(CreateLocalTransport()), sets_(3), api_(RecordingNccl()) {
    calls.clear();
    comms_created = 0;
  }
  NcclOperations Make(int streams = 1) {
    GpuConfig config;
    config.num_nccl_streams = streams;
    return NcclOperations(&api_, &runtime_, transport_.get(), &sets_, 0, config);
  }
  std::unique_ptr<Transport> transport_;
  ProcessSetRegistry sets_;  // ranks 0-2; this process is rank 0
  HostRuntime runtime_;
  NcclApi api_;
};

TEST_F(NcclCalls, FusedAverageWithScalingIsOnePreMulSumAllreduce) {
  std::vector<char> a(64), b(64);
  PendingOp x = Op(TUTTI_FLOAT32, {{3}}, &a), y = Op(TUTTI_FLOAT32, {{2, 2}}, &b);
  for (PendingOp* op : {&x, &y}) {
    op->meta.reduce_op = TUTTI_REDUCE_AVERAGE;
    op->meta.prescale = 1.5;
  }
  {
    NcclOperations nccl = Make();
    ASSERT_TRUE(nccl.Allreduce(0, {&x, &y}).ok());
    // The same communicator serves the next call.
    ASSERT_TRUE(nccl.Allreduce(0, {&x}).ok());
  }
  const std::vector<std::string> expected = {
      "unique id", "init comm1 n=3 rank=0 id=x",
      "premulsum 0.5 type=7 residence=1",  // 1.5 / 3 ranks
      "allreduce comm1 count=7 type=7 op=17 in place",  // 3 + 4 floats in the fusion buffer
      "destroy op 17",
      "premulsum 0.5 type=7 residence=1",
      "allreduce comm1 count=3 type=7 op=17 in place",  // one tensor: in its own buffer
      "destroy op 17",
      "destroy comm1"};
  EXPECT_EQ(calls, expected);
  // Fusion copies: one batch of 2 in and one of 2 out around the NCCL call.
  const auto& log = runtime_.log();
  EXPECT_NE(std::find(log.begin(), log.end(), "copy s0.0 x2 28B"), log.end());
}

TEST_F(NcclCalls, ScalesThatCancelNeedNoPreMulSum) {
  std::vector<char> a(64);
  PendingOp x = Op(TUTTI_FLOAT32, {{3}}, &a);
  x.meta.reduce_op = TUTTI_REDUCE_AVERAGE;
  x.meta.prescale = 3.0;  // 3 / 3 ranks: a plain sum
  ASSERT_TRUE(Make().Allreduce(0, {&x}).ok());
  EXPECT_EQ(calls[2], "allreduce comm1 count=3 type=7 op=0 in place");
}

TEST_F(NcclCalls, PlainOpsAndStreamsInTurn) {
  std::vector<char> a(64);
  PendingOp x = Op(TUTTI_BFLOAT16, {{4}}, &a);
  x.meta.reduce_op = TUTTI_REDUCE_AVERAGE;
  PendingOp m = Op(TUTTI_INT32, {{4}}, &a);
  m.meta.reduce_op = TUTTI_REDUCE_MIN;
  {
    NcclOperations nccl = Make(2);
    ASSERT_TRUE(nccl.Allreduce(0, {&x}).ok());
    ASSERT_TRUE(nccl.Allreduce(0, {&m}).ok());
    ASSERT_TRUE(nccl.Allreduce(0, {&x}).ok());
  }
  const std::vector<std::string> expected = {
      "unique id", "init comm1 n=3 rank=0 id=x",
      "allreduce comm1 count=4 type=9 op=4 in place",  // ncclAvg of bfloat16
      "unique id", "init comm2 n=3 rank=0 id=x",     // the second stream's communicator
      "allreduce comm2 count=4 type=2 op=3 in place",  // ncclMin of int32
      "allreduce comm1 count=4 type=9 op=4 in place",  // back to the first stream
      "destroy comm1", "destroy comm2"};
  EXPECT_EQ(calls, expected);
}

TEST_F(NcclCalls, UnevenAllgatherIsGroupedBroadcasts) {
  std::vector<char> a(64);
  PendingOp op = Op(TUTTI_FLOAT32, {{1, 2}}, &a);
  Allocated allocated;
  op.allocate = &Allocate;
  op.user_data = &allocated;
  Response r;
  r.collective = Collective::kAllgather;
  r.sizes = {1, 2, 3};  // rows from ranks 0, 1, 2
  ASSERT_TRUE(Make().Execute(r, op).ok());
  EXPECT_EQ(allocated.shapes, (std::vector<std::vector<int64_t>>{{6, 2}}));
  const std::vector<std::string> expected = {
      "unique id", "init comm1 n=3 rank=0 id=x", "group {",
      "broadcast count=8 type=1 root=0", "broadcast count=16 type=1 root=1",
      "broadcast count=24 type=1 root=2", "}", "destroy comm1"};
  EXPECT_EQ(calls, expected);
}

TEST_F(NcclCalls, EvenAllgatherAndBroadcastMoveBytes) {
  std::vector<char> a(64);
  PendingOp op = Op(TUTTI_FLOAT64, {{2}}, &a);
  Allocated allocated;
  op.allocate = &Allocate;
  op.user_data = &allocated;
  Response r;
  r.collective = Collective::kAllgather;
  r.sizes = {2, 2, 2};
  NcclOperations nccl = Make();
  ASSERT_TRUE(nccl.Execute(r, op).ok());
  op.meta.root_rank = 2;
  r.collective = Collective::kBroadcast;
  ASSERT_TRUE(nccl.Execute(r, op).ok());
  EXPECT_EQ(calls[2], "allgather count=16 type=1");
  EXPECT_EQ(calls[3], "broadcast count=16 type=1 root=2");
}

TEST_F(NcclCalls, AlltoallSendsAndReceivesBySplits) {
  std::vector<char> a(256);
  PendingOp op = Op(TUTTI_INT64, {{4, 2}}, &a);
  Allocated allocated;
  op.allocate = &Allocate;
  op.user_data = &allocated;
  int32_t received[3] = {-1, -1, -1};
  op.received_splits = received;
  Response r;
  r.collective = Collective::kAlltoall;
  r.sizes = {1, 0, 3,   // rank 0 sends 1 row to 0, none to 1, 3 to 2
             2, 2, 2,   // rank 1
             0, 1, 1};  // rank 2
  ASSERT_TRUE(Make().Execute(r, op).ok());
  EXPECT_EQ(allocated.shapes, (std::vector<std::vector<int64_t>>{{3, 2}}));  // 1 + 2 + 0 rows
  const std::vector<std::string> expected = {
      "unique id", "init comm1 n=3 rank=0 id=x", "group {",
      "send count=16 peer=0", "recv count=16 peer=0",
      "recv count=32 peer=1",
      "send count=48 peer=2", "}", "destroy comm1"};
  EXPECT_EQ(calls, expected);
  EXPECT_EQ(received[0], 1);
  EXPECT_EQ(received[1], 2);
  EXPECT_EQ(received[2], 0);
}

TEST_F(NcclCalls, ReducescatterEvenOrGroupedReduces) {
  std::vector<char> a(512);
  Allocated allocated;
  Response r;
  r.collective = Collective::kReducescatter;
  PendingOp even = Op(TUTTI_FLOAT16, {{6, 2}}, &a);
  even.meta.reduce_op = TUTTI_REDUCE_SUM;
  even.allocate = &Allocate;
  even.user_data = &allocated;
  PendingOp uneven = even;
  uneven.tensors[0].shape = {7, 2};  // 3, 2, 2 rows
  {
    NcclOperations nccl = Make();
    ASSERT_TRUE(nccl.Execute(r, even).ok());
    ASSERT_TRUE(nccl.Execute(r, uneven).ok());
  }
  const std::vector<std::string> expected = {
      "unique id", "init comm1 n=3 rank=0 id=x",
      "reducescatter count=4 type=6 op=0",
      "group {", "reduce count=6 type=6 op=0 root=0", "reduce count=4 type=6 op=0 root=1",
      "reduce count=4 type=6 op=0 root=2", "}", "destroy comm1"};
  EXPECT_EQ(calls, expected);
  EXPECT_EQ(allocated.shapes, (std::vector<std::vector<int64_t>>{{2, 2}, {3, 2}}));
}

TEST_F(NcclCalls, AFailedCallNamesItAndClosesTheGroup) {
  api_.Send = [](const void*, size_t, int, int, ncclComm, cudaStream) { return 3; };
  std::vector<char> a(64);
  PendingOp op = Op(TUTTI_UINT8, {{3}}, &a);
  Allocated allocated;
  op.allocate = &Allocate;
  op.user_data = &allocated;
  Response r;
  r.collective = Collective::kAlltoall;
  r.sizes = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  Status s = Make().Execute(r, op);
  EXPECT_EQ(s.code(), TUTTI_ERR_INTERNAL);
  EXPECT_EQ(s.message(), "ncclSend failed: recorded failure (NCCL error 3)");
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "}"), 1);
}

}  // namespace
}  // namespace gpu
}  // namespace tutti
