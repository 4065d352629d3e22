#include "negotiation/negotiation.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tutti {
namespace {

RequestMeta Allreduce(const std::string& name, tutti_dtype dtype = TUTTI_FLOAT32,
                      std::vector<int64_t> shape = {4}) {
  RequestMeta m;
  m.name = name;
  m.dtype = dtype;
  m.shapes = {shape};
  return m;
}

std::vector<std::string> Names(const std::vector<Response>& responses) {
  std::vector<std::string> names;
  for (const Response& r : responses) {
    for (const std::string& n : r.names) names.push_back(n);
  }
  return names;
}

TEST(NegotiationTest, ReadyOnlyWhenEveryRankSubmitted) {
  Coordinator c(3);
  c.Submit(0, Allreduce("a"));
  c.Submit(2, Allreduce("a"));
  EXPECT_TRUE(c.TakeReady().empty());
  EXPECT_EQ(c.pending(), 1u);
  c.Submit(1, Allreduce("a"));
  std::vector<Response> ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].kind, Response::Kind::kExecute);
  EXPECT_EQ(ready[0].names, std::vector<std::string>{"a"});
  EXPECT_EQ(c.pending(), 0u);
  EXPECT_TRUE(c.TakeReady().empty());
}

TEST(NegotiationTest, DifferentSubmissionOrdersGiveOneOrder) {
  Coordinator c(2);
  // Rank 0 submits a, b, c; rank 1 submits c, a, b (across two cycles).
  c.Submit(0, Allreduce("a"));
  c.Submit(0, Allreduce("b"));
  c.Submit(0, Allreduce("c"));
  c.Submit(1, Allreduce("c"));
  EXPECT_EQ(Names(c.TakeReady()), std::vector<std::string>{"c"});
  c.Submit(1, Allreduce("b"));
  c.Submit(1, Allreduce("a"));
  // Order in which they became complete on the coordinator.
  EXPECT_EQ(Names(c.TakeReady()), (std::vector<std::string>{"b", "a"}));
}

TEST(NegotiationTest, NameCanBeReusedAfterCompletion) {
  Coordinator c(2);
  for (int round = 0; round < 3; ++round) {
    c.Submit(1, Allreduce("grad"));
    c.Submit(0, Allreduce("grad"));
    EXPECT_EQ(Names(c.TakeReady()), std::vector<std::string>{"grad"});
  }
}

TEST(NegotiationTest, MismatchNamesTensorRanksAndField) {
  Coordinator c(3);
  c.Submit(0, Allreduce("layer1/weight", TUTTI_FLOAT32, {4, 4}));
  c.Submit(1, Allreduce("layer1/weight", TUTTI_FLOAT16, {4, 4}));
  c.Submit(2, Allreduce("layer1/weight", TUTTI_FLOAT32, {4, 5}));
  std::vector<Response> ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].kind, Response::Kind::kError);
  const std::string& e = ready[0].error;
  EXPECT_NE(e.find("allreduce of tensor 'layer1/weight'"), std::string::npos) << e;
  EXPECT_NE(e.find("dtype differs: float32 on ranks 0, 2; float16 on rank 1"), std::string::npos)
      << e;
  EXPECT_NE(e.find("shape differs: [4, 4] on ranks 0, 1; [4, 5] on rank 2"), std::string::npos)
      << e;
}

TEST(NegotiationTest, MismatchOfOpAndScaleFactors) {
  Coordinator c(2);
  RequestMeta a = Allreduce("t"), b = Allreduce("t");
  b.reduce_op = TUTTI_REDUCE_MAX;
  b.prescale = 0.5;
  b.postscale = 2;
  c.Submit(0, a);
  c.Submit(1, b);
  std::vector<Response> ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  const std::string& e = ready[0].error;
  EXPECT_NE(e.find("reduce op differs: sum on rank 0; max on rank 1"), std::string::npos) << e;
  EXPECT_NE(e.find("prescale differs: 1 on rank 0; 0.5 on rank 1"), std::string::npos) << e;
  EXPECT_NE(e.find("postscale differs: 1 on rank 0; 2 on rank 1"), std::string::npos) << e;
}

TEST(NegotiationTest, AgreeingRequestsHaveNoMismatch) {
  EXPECT_EQ(DescribeMismatch({Allreduce("x"), Allreduce("x"), Allreduce("x")}), "");
}

TEST(NegotiationTest, DuplicateSubmissionFailsTheName) {
  Coordinator c(2);
  c.Submit(0, Allreduce("d"));
  c.Submit(0, Allreduce("d"));
  c.Submit(1, Allreduce("d"));
  std::vector<Response> ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].kind, Response::Kind::kError);
  EXPECT_NE(ready[0].error.find("rank 0 submitted it twice"), std::string::npos);
}

TEST(NegotiationTest, StalledListsMissingRanks) {
  Coordinator c(4);
  c.Submit(0, Allreduce("slow"));
  c.Submit(2, Allreduce("slow"));
  std::vector<std::string> stalled = c.Stalled(std::chrono::seconds(0));
  ASSERT_EQ(stalled.size(), 1u);
  EXPECT_EQ(stalled[0], "'slow' (missing ranks 1, 3)");
  EXPECT_TRUE(c.Stalled(std::chrono::hours(1)).empty());
}

TEST(NegotiationTest, DeadlockNeedsEveryRankWaitingAndQuiet) {
  Coordinator c(3);
  c.Submit(0, Allreduce("a"));  // ranks 0 and 1 wait for each other's names
  c.Submit(1, Allreduce("b"));
  EXPECT_FALSE(c.Deadlocked(std::chrono::seconds(0)));  // rank 2 waits for nothing
  c.Submit(2, Allreduce("a"));
  EXPECT_TRUE(c.Deadlocked(std::chrono::seconds(0)));
  EXPECT_FALSE(c.Deadlocked(std::chrono::hours(1)));  // a submission came just now
  std::vector<Response> failed = c.FailAllWaiting("deadlock: x");
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(failed[0].kind, Response::Kind::kError);
  EXPECT_EQ(failed[0].error, "allreduce of tensor 'a': deadlock: x");
  EXPECT_EQ(c.pending(), 0u);
  EXPECT_FALSE(c.Deadlocked(std::chrono::seconds(0)));  // nothing waits any more
}

TEST(NegotiationTest, JoinedRanksDoNotCountAsRunning) {
  Coordinator c(2);
  c.Submit(0, Allreduce("a"));
  EXPECT_FALSE(c.Deadlocked(std::chrono::seconds(0)));
  RequestMeta join;
  join.name = "join";
  join.collective = Collective::kJoin;
  c.Submit(1, join);  // "a" is ready now: rank 1 contributes zeros
  EXPECT_FALSE(c.Deadlocked(std::chrono::seconds(0)));
}

TEST(NegotiationTest, SingleRank) {
  Coordinator c(1);
  c.Submit(0, Allreduce("solo"));
  EXPECT_EQ(Names(c.TakeReady()), std::vector<std::string>{"solo"});
}

RequestMeta Of(Collective collective, const std::string& name, std::vector<int64_t> shape) {
  RequestMeta m = Allreduce(name, TUTTI_FLOAT32, shape);
  m.collective = collective;
  return m;
}

std::string OnlyError(Coordinator* c) {
  std::vector<Response> ready = c->TakeReady();
  if (ready.size() != 1 || ready[0].kind != Response::Kind::kError) return "<no single error>";
  return ready[0].error;
}

TEST(NegotiationChecksTest, BroadcastRootMismatch) {
  Coordinator c(2);
  RequestMeta a = Of(Collective::kBroadcast, "w", {3}), b = a;
  b.root_rank = 1;
  c.Submit(0, a);
  c.Submit(1, b);
  EXPECT_EQ(OnlyError(&c),
            "broadcast of tensor 'w': ranks disagree: root_rank differs: 0 on rank 0; 1 on rank 1");
}

// On a set the requests carry the root's rank within the set (not the global root_rank the
// caller passed), and the message says so.
TEST(NegotiationChecksTest, BroadcastRootMismatchOnASet) {
  RequestMeta a = Of(Collective::kBroadcast, "w", {3}), b = a;
  a.process_set = b.process_set = 1;
  b.root_rank = 1;
  const RequestMeta* first = &a;
  const RequestMeta* second = &b;
  EXPECT_EQ(DescribeMismatch({{1, first}, {3, second}}),
            "root (rank within the process set) differs: 0 on rank 1; 1 on rank 3");
}

TEST(NegotiationChecksTest, CollectiveMismatch) {
  Coordinator c(2);
  c.Submit(0, Of(Collective::kAllreduce, "t", {3}));
  c.Submit(1, Of(Collective::kAllgather, "t", {3}));
  EXPECT_EQ(OnlyError(&c),
            "allreduce of tensor 't': ranks disagree: collective differs: allreduce on rank 0; "
            "allgather on rank 1");
}

TEST(NegotiationChecksTest, AllgatherComparesAllButFirstDimension) {
  Coordinator c(3);
  c.Submit(0, Of(Collective::kAllgather, "g", {1, 4}));
  c.Submit(1, Of(Collective::kAllgather, "g", {5, 4}));
  c.Submit(2, Of(Collective::kAllgather, "g", {0, 4}));
  std::vector<Response> ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].kind, Response::Kind::kExecute) << ready[0].error;
  EXPECT_EQ(ready[0].sizes, (std::vector<int64_t>{1, 5, 0}));
  c.Submit(0, Of(Collective::kAllgather, "h", {1, 4}));
  c.Submit(1, Of(Collective::kAllgather, "h", {1, 5}));
  c.Submit(2, Of(Collective::kAllgather, "h", {1, 4}));
  EXPECT_EQ(OnlyError(&c),
            "allgather of tensor 'h': ranks disagree: shape (all but the first dimension) "
            "differs: [4] on ranks 0, 2; [5] on rank 1");
}

TEST(NegotiationChecksTest, GroupedSizeMismatch) {
  Coordinator c(2);
  RequestMeta a = Allreduce("grp"), b = Allreduce("grp");
  b.shapes.push_back({2});
  c.Submit(0, a);
  c.Submit(1, b);
  std::string e = OnlyError(&c);
  EXPECT_NE(e.find("number of tensors differs: 1 on rank 0; 2 on rank 1"), std::string::npos) << e;
}

TEST(NegotiationChecksTest, ProcessSetMismatch) {
  ProcessSetRegistry sets(2);
  sets.Add({0, 1});
  Coordinator c(2, &sets);
  RequestMeta a = Allreduce("p"), b = Allreduce("p");
  b.process_set = 1;
  c.Submit(0, a);
  c.Submit(1, b);
  EXPECT_EQ(OnlyError(&c),
            "allreduce of tensor 'p': ranks disagree: process set differs: 0 on rank 0; 1 on "
            "rank 1");
}

TEST(NegotiationChecksTest, ProcessSetRequestReadyWhenMembersSubmitted) {
  ProcessSetRegistry sets(3);
  const int32_t id = sets.Add({0, 2});
  Coordinator c(3, &sets);
  RequestMeta m = Allreduce("s");
  m.process_set = id;
  c.Submit(2, m);
  EXPECT_TRUE(c.TakeReady().empty());
  c.Submit(0, m);
  std::vector<Response> ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].kind, Response::Kind::kExecute);
  EXPECT_EQ(ready[0].process_set, id);
}

TEST(NegotiationChecksTest, AlltoallSplitMatrix) {
  Coordinator c(2);
  RequestMeta a = Of(Collective::kAlltoall, "x", {4, 2}), b = Of(Collective::kAlltoall, "x", {3, 2});
  b.splits = {1, 2};  // a: equal parts of 4 rows
  c.Submit(0, a);
  c.Submit(1, b);
  std::vector<Response> ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].kind, Response::Kind::kExecute) << ready[0].error;
  EXPECT_EQ(ready[0].sizes, (std::vector<int64_t>{2, 2, 1, 2}));
}

TEST(NegotiationJoinTest, AllreduceRunsWithoutJoinedRankAndJoinReturnsLast) {
  Coordinator c(3);
  RequestMeta join;
  join.name = "tutti.join";
  join.collective = Collective::kJoin;
  c.Submit(1, join);
  c.Submit(0, Allreduce("a", TUTTI_FLOAT16, {2, 3}));
  EXPECT_TRUE(c.TakeReady().empty());
  c.Submit(2, Allreduce("a", TUTTI_FLOAT16, {2, 3}));
  std::vector<Response> ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].kind, Response::Kind::kExecute);
  EXPECT_EQ(ready[0].joined_ranks, std::vector<int32_t>{1});
  EXPECT_EQ(ready[0].counts, std::vector<int64_t>{6});
  EXPECT_EQ(ready[0].dtype, TUTTI_FLOAT16);
  c.Submit(2, join);
  c.Submit(0, Of(Collective::kBroadcast, "b", {1}));
  EXPECT_EQ(OnlyError(&c),
            "broadcast of tensor 'b': ranks 1, 2 have joined (called join()) and cannot take "
            "part; only allreduce runs while ranks are joined");
  c.Submit(0, join);
  ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].collective, Collective::kJoin);
  EXPECT_EQ(ready[0].join_result, 0);
  // The joined state is reset: the next allreduce waits for everyone again.
  c.Submit(0, Allreduce("c"));
  EXPECT_TRUE(c.TakeReady().empty());
}

TEST(NegotiationJoinTest, PendingRequestBecomesReadyWhenMissingRankJoins) {
  Coordinator c(2);
  c.Submit(0, Allreduce("late"));
  EXPECT_TRUE(c.TakeReady().empty());
  RequestMeta join;
  join.name = "tutti.join";
  join.collective = Collective::kJoin;
  c.Submit(1, join);
  std::vector<Response> ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].names, std::vector<std::string>{"late"});
  EXPECT_EQ(ready[0].joined_ranks, std::vector<int32_t>{1});
}

}  // namespace
}  // namespace tutti
