#include "requests/request_queue.h"

#include <gtest/gtest.h>

namespace tutti {
namespace {

PendingOp Op(const std::string& name) {
  PendingOp op;
  op.meta.name = name;
  return op;
}

TEST(RequestQueueTest, NewRequestsAreTakenOnceInOrder) {
  RequestQueue q;
  ASSERT_TRUE(q.Enqueue(Op("b")).ok());
  ASSERT_TRUE(q.Enqueue(Op("a")).ok());
  std::vector<RequestMeta> fresh = q.TakeNew();
  ASSERT_EQ(fresh.size(), 2u);
  EXPECT_EQ(fresh[0].name, "b");
  EXPECT_EQ(fresh[1].name, "a");
  EXPECT_TRUE(q.TakeNew().empty());
}

TEST(RequestQueueTest, WaitingMeansSeenByACycleAndStillInFlight) {
  RequestQueue q;
  EXPECT_FALSE(q.HasWaiting());
  ASSERT_TRUE(q.Enqueue(Op("first")).ok());
  EXPECT_FALSE(q.HasWaiting());  // new only
  q.TakeNew();
  EXPECT_TRUE(q.HasWaiting());
  ASSERT_TRUE(q.Enqueue(Op("second")).ok());
  PendingOp taken;
  ASSERT_TRUE(q.Take("first", &taken));
  EXPECT_FALSE(q.HasWaiting());  // "second" is new
  q.TakeNew();
  EXPECT_TRUE(q.HasWaiting());
  ASSERT_TRUE(q.Take("second", &taken));
  EXPECT_FALSE(q.HasWaiting());
}

TEST(RequestQueueTest, ARequestTakenBeforeACycleSawItIsNoLongerNew) {
  RequestQueue q;
  ASSERT_TRUE(q.Enqueue(Op("answered early")).ok());
  ASSERT_TRUE(q.Enqueue(Op("later")).ok());
  PendingOp taken;
  ASSERT_TRUE(q.Take("answered early", &taken));
  EXPECT_EQ(taken.meta.name, "answered early");
  EXPECT_TRUE(q.HasNew());
  std::vector<RequestMeta> fresh = q.TakeNew();
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0].name, "later");
  EXPECT_FALSE(q.HasNew());
  EXPECT_TRUE(q.HasWaiting());
  // The name is free again.
  EXPECT_TRUE(q.Enqueue(Op("answered early")).ok());
}

TEST(RequestQueueTest, DuplicateNameInFlightIsRefused) {
  RequestQueue q;
  ASSERT_TRUE(q.Enqueue(Op("grad")).ok());
  Status s = q.Enqueue(Op("grad"));
  EXPECT_EQ(s.code(), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message().find("'grad'"), std::string::npos) << s.message();
  PendingOp taken;
  ASSERT_TRUE(q.Take("grad", &taken));
  EXPECT_TRUE(q.Enqueue(Op("grad")).ok());  // free again once taken
}

TEST(RequestQueueTest, TakeUnknownName) {
  RequestQueue q;
  PendingOp taken;
  EXPECT_FALSE(q.Take("nope", &taken));
}

TEST(RequestQueueTest, CloseReturnsPendingAndRefusesMore) {
  RequestQueue q;
  ASSERT_TRUE(q.Enqueue(Op("x")).ok());
  ASSERT_TRUE(q.Enqueue(Op("y")).ok());
  q.TakeNew();
  std::vector<PendingOp> pending = q.Close(Status::Aborted("stopping"));
  EXPECT_EQ(pending.size(), 2u);
  Status s = q.Enqueue(Op("z"));
  EXPECT_EQ(s.code(), TUTTI_ERR_ABORTED);
  EXPECT_EQ(s.message(), "stopping");
  EXPECT_TRUE(q.Close(Status::Aborted("again")).empty());
}

}  // namespace
}  // namespace tutti
