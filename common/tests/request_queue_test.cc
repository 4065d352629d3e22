#include "requests/request_queue.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tutti {
namespace {

PendingOp Op(const std::string& name) {
  PendingOp op;
  op.meta.name = name;
  return op;
}

// TakeAll() of `names` into *taken (one request per name); whether each was found.
std::vector<bool> TakeAllOf(RequestQueue* q, const std::vector<std::string>& names,
                            std::vector<PendingOp>* taken) {
  std::vector<const std::string*> wanted;
  for (const std::string& name : names) wanted.push_back(&name);
  taken->clear();
  taken->resize(names.size());
  std::vector<PendingOp*> into;
  for (PendingOp& op : *taken) into.push_back(&op);
  std::vector<bool> found;
  q->TakeAll(wanted, into, &found);
  return found;
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

// An executed request given back lives on in a spare node until the next Enqueue, which
// reuses the node and frees the old request there (on the submitting thread).
TEST(RequestQueueTest, RecycledRequestsAreFreedByTheNextEnqueue) {
  RequestQueue q;
  PendingOp first = Op("first name, longer than a short string's inline buffer");
  first.finished = std::make_shared<std::atomic<bool>>(false);
  std::weak_ptr<std::atomic<bool>> first_alive = first.finished;
  ASSERT_TRUE(q.Enqueue(std::move(first)).ok());
  q.TakeNew();
  std::vector<PendingOp> executed(1);
  ASSERT_TRUE(q.Take("first name, longer than a short string's inline buffer", &executed[0]));
  q.Recycle(&executed);
  EXPECT_TRUE(executed.empty());
  EXPECT_FALSE(first_alive.expired());  // kept by the spare node

  ASSERT_TRUE(q.Enqueue(Op("second")).ok());
  EXPECT_TRUE(first_alive.expired());
  // The reused node holds the new request under its own name; the old name is free.
  std::vector<RequestMeta> fresh = q.TakeNew();
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0].name, "second");
  EXPECT_EQ(q.Enqueue(Op("second")).code(), TUTTI_ERR_INVALID_ARGUMENT);
  PendingOp taken;
  EXPECT_FALSE(q.Take("first name, longer than a short string's inline buffer", &taken));
  ASSERT_TRUE(q.Take("second", &taken));
  EXPECT_EQ(taken.meta.name, "second");
  EXPECT_TRUE(q.Empty());
}

// A duplicate name refused while reusing a spare node leaves the queue as it was.
TEST(RequestQueueTest, DuplicateOnAReusedNodeIsRefused) {
  RequestQueue q;
  ASSERT_TRUE(q.Enqueue(Op("a")).ok());
  ASSERT_TRUE(q.Enqueue(Op("b")).ok());
  std::vector<PendingOp> executed(1);
  ASSERT_TRUE(q.Take("a", &executed[0]));
  q.Recycle(&executed);
  EXPECT_EQ(q.Enqueue(Op("b")).code(), TUTTI_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(q.Enqueue(Op("c")).ok());  // the spare node is still usable
  std::vector<RequestMeta> fresh = q.TakeNew();
  ASSERT_EQ(fresh.size(), 2u);
  EXPECT_EQ(fresh[0].name, "b");
  EXPECT_EQ(fresh[1].name, "c");
}

// More executed requests than spare nodes: the rest are freed by Recycle itself.
TEST(RequestQueueTest, RecycleWithoutSpareNodesFreesTheRequests) {
  RequestQueue q;
  std::vector<PendingOp> executed(2);
  executed[0].finished = std::make_shared<std::atomic<bool>>(false);
  std::weak_ptr<std::atomic<bool>> alive = executed[0].finished;
  q.Recycle(&executed);
  EXPECT_TRUE(executed.empty());
  EXPECT_TRUE(alive.expired());
}

// TakeAll takes in batches under the lock; every name is answered, across batches too.
TEST(RequestQueueTest, TakeAllAnswersEveryName) {
  RequestQueue q;
  std::vector<std::string> names;
  for (int i = 0; i < 70; ++i) names.push_back("request " + std::to_string(i));
  for (int i = 0; i < 70; i += 2) ASSERT_TRUE(q.Enqueue(Op(names[i])).ok());  // even only
  std::vector<PendingOp> taken;
  std::vector<bool> found = TakeAllOf(&q, names, &taken);
  ASSERT_EQ(found.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(found[i], i % 2 == 0) << names[i];
    EXPECT_EQ(taken[i].meta.name, i % 2 == 0 ? names[i] : "") << names[i];
  }
  EXPECT_TRUE(q.Empty());
  EXPECT_FALSE(q.HasNew());  // taken before a cycle saw them: no longer new
}

// A submitting thread and a cycle thread at once, as in the core: every request is taken
// exactly once with its own name and tensor view, while nodes and requests are recycled.
TEST(RequestQueueTest, ConcurrentSubmitTakeAndRecycle) {
  RequestQueue q;
  constexpr int kRequests = 20000;
  std::atomic<bool> submitted{false};
  std::thread submitter([&] {
    for (int i = 0; i < kRequests; ++i) {
      PendingOp op = Op("tensor " + std::to_string(i) + " of a long-ish gradient name");
      op.tensors.resize(1);
      op.tensors[0].shape = {i};
      EXPECT_TRUE(q.Enqueue(std::move(op)).ok());  // names are unique
    }
    submitted = true;
  });
  std::vector<int> seen(kRequests, 0);
  std::vector<PendingOp> executed;
  while (true) {
    const bool last_round = submitted.load();
    std::vector<RequestMeta> fresh = q.TakeNew();
    std::vector<std::string> names;
    for (const RequestMeta& meta : fresh) names.push_back(meta.name);
    std::vector<PendingOp> taken;
    std::vector<bool> found = TakeAllOf(&q, names, &taken);
    for (size_t i = 0; i < taken.size(); ++i) {
      ASSERT_TRUE(found[i]) << names[i];
      ASSERT_EQ(taken[i].meta.name, names[i]);
      ASSERT_EQ(taken[i].tensors.size(), 1u);
      const int64_t index = taken[i].tensors[0].shape.at(0);
      ASSERT_EQ(names[i], "tensor " + std::to_string(index) + " of a long-ish gradient name");
      ++seen[static_cast<size_t>(index)];
      executed.push_back(std::move(taken[i]));
    }
    q.Recycle(&executed);
    if (last_round && fresh.empty()) break;
  }
  submitter.join();
  for (int i = 0; i < kRequests; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)], 1) << i;
  EXPECT_TRUE(q.Empty());
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
