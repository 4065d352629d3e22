// Enqueue-time validation: each refused request and its message.
#include "requests/request_builder.h"

#include <gtest/gtest.h>

namespace tutti {
namespace {

void Done(void*, tutti_status, const char*) {}
void* Allocate(void*, int32_t, int32_t, const int64_t*) { return nullptr; }

class RequestBuilderTest : public ::testing::Test {
 protected:
  RequestBuilderTest() : sets_(3) {
    pair_ = sets_.Add({0, 2});
    request_.name = "t";
    request_.collective = TUTTI_OP_ALLREDUCE;
    request_.num_tensors = 1;
    request_.inputs = &tensor_;
    request_.outputs = &tensor_;
    request_.allocate = Allocate;
    request_.prescale = request_.postscale = 1.0;
    request_.reduce_op = TUTTI_REDUCE_SUM;
    request_.done = Done;
  }

  // The message of a refused request ("" when accepted).
  std::string Refusal(int rank = 0) {
    PendingOp op;
    Status s = BuildRequest(request_, rank, sets_, &op);
    return s.ok() ? "" : s.message();
  }

  ProcessSetRegistry sets_;
  int32_t pair_;
  float data_[6] = {0};
  int64_t shape_[2] = {3, 2};
  tutti_tensor tensor_ = {data_, TUTTI_FLOAT32, 2, shape_};
  tutti_request request_ = {};
};

TEST_F(RequestBuilderTest, AcceptsValidRequests) {
  EXPECT_EQ(Refusal(), "");
  request_.collective = TUTTI_OP_BARRIER;
  request_.num_tensors = 0;
  EXPECT_EQ(Refusal(), "");
}

TEST_F(RequestBuilderTest, BroadcastRootOutOfRange) {
  request_.collective = TUTTI_OP_BROADCAST;
  request_.root_rank = 3;
  EXPECT_EQ(Refusal(), "broadcast of 't': root_rank 3 is out of range for a process set of size 3");
  request_.root_rank = -1;
  EXPECT_EQ(Refusal(), "broadcast of 't': root_rank -1 is out of range for a process set of size 3");
}

// root_rank is global (Horovod's convention); the request carries the root's rank in the set.
TEST_F(RequestBuilderTest, BroadcastRootIsGlobalOnASet) {
  request_.collective = TUTTI_OP_BROADCAST;
  request_.process_set = pair_;  // ranks 0 and 2
  for (int root : {0, 2}) {
    request_.root_rank = root;
    for (int rank : {0, 2}) {
      PendingOp op;
      ASSERT_TRUE(BuildRequest(request_, rank, sets_, &op).ok()) << Refusal(rank);
      EXPECT_EQ(op.meta.root_rank, root / 2) << "root " << root << " on rank " << rank;
    }
  }
  for (int root : {1, 5, -1}) {
    request_.root_rank = root;
    EXPECT_EQ(Refusal(), "broadcast of 't': root_rank " + std::to_string(root) +
                             " is not a member of process set 1 (ranks 0, 2)");
  }
  PendingOp op;
  request_.process_set = TUTTI_GLOBAL_PROCESS_SET;
  request_.root_rank = 2;
  ASSERT_TRUE(BuildRequest(request_, 1, sets_, &op).ok());
  EXPECT_EQ(op.meta.root_rank, 2);
}

TEST_F(RequestBuilderTest, UnknownCollectiveAndDtype) {
  request_.collective = static_cast<tutti_collective>(42);
  EXPECT_EQ(Refusal(), "unknown collective 42");
  request_.collective = TUTTI_OP_ALLREDUCE;
  tensor_.dtype = static_cast<tutti_dtype>(99);
  EXPECT_EQ(Refusal(), "allreduce of 't': input tensor has invalid dtype 99");
}

TEST_F(RequestBuilderTest, ProcessSetMembership) {
  request_.process_set = 9;
  EXPECT_EQ(Refusal(), "allreduce of 't': process set 9 is unknown (it was removed or never added)");
  request_.process_set = pair_;
  EXPECT_EQ(Refusal(1), "allreduce of 't': this rank (1) is not in process set 1");
  EXPECT_EQ(Refusal(2), "");
}

TEST_F(RequestBuilderTest, NullDataAndBoolAverage) {
  tensor_.data = nullptr;
  EXPECT_EQ(Refusal(), "allreduce of 't': input tensor has no data pointer");
  tensor_.data = data_;
  tensor_.dtype = TUTTI_BOOL;
  request_.reduce_op = TUTTI_REDUCE_AVERAGE;
  EXPECT_NE(Refusal().find("AVERAGE is not defined for bool"), std::string::npos) << Refusal();
}

TEST_F(RequestBuilderTest, AlltoallSplits) {
  request_.collective = TUTTI_OP_ALLTOALL;
  request_.outputs = nullptr;
  EXPECT_EQ(Refusal(), "");  // 3 rows over 3 ranks divide evenly
  request_.process_set = pair_;
  EXPECT_EQ(Refusal(), "alltoall of 't': the first dimension 3 is not divisible by the process "
                       "set size 2; pass splits to send unequal parts");
  int32_t splits[2] = {1, 1};
  request_.splits = splits;
  EXPECT_EQ(Refusal(), "alltoall of 't': splits sum to 2 but the first dimension is 3");
  splits[1] = 2;
  EXPECT_EQ(Refusal(), "");
}

TEST_F(RequestBuilderTest, GroupingAndShapes) {
  request_.collective = TUTTI_OP_BROADCAST;
  request_.num_tensors = 2;
  tutti_tensor two[2] = {tensor_, tensor_};
  request_.inputs = request_.outputs = two;
  EXPECT_NE(Refusal().find("takes exactly one tensor"), std::string::npos) << Refusal();
  request_.collective = TUTTI_OP_ALLGATHER;
  two[1].dtype = TUTTI_INT32;
  EXPECT_EQ(Refusal(), "allgather of 't': all tensors of a grouped request need one dtype: "
                       "input 1 is int32, input 0 is float32");
  request_.num_tensors = 1;
  tensor_.ndim = 0;
  request_.inputs = &tensor_;
  EXPECT_EQ(Refusal(), "allgather of 't': input is a scalar; allgather needs at least one "
                       "dimension");
}

TEST_F(RequestBuilderTest, JoinOnlyOnGlobalSet) {
  request_.collective = TUTTI_OP_JOIN;
  request_.name = nullptr;
  request_.process_set = pair_;
  EXPECT_EQ(Refusal(), "join of 'tutti.join': join is supported on the global process set only");
}

}  // namespace
}  // namespace tutti
