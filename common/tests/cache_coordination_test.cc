#include "negotiation/cache_coordination.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tutti {
namespace {

using Clock = CacheCoordination::Clock;

RequestMeta Meta(const std::string& name, std::vector<int64_t> shape = {4}) {
  RequestMeta m;
  m.name = name;
  m.shapes = {shape};
  return m;
}

Response Executed(const std::string& name, int32_t set = TUTTI_GLOBAL_PROCESS_SET) {
  Response r;
  r.names = {name};
  r.process_set = set;
  return r;
}

// The flags every rank agreed on, with the given ready and invalidated slots.
CycleFlags Agreed(int slots, std::vector<int> ready, std::vector<int> invalidate = {}) {
  CycleFlags agreed;
  agreed.ready = SlotBits(slots);
  agreed.invalidate = SlotBits(slots);
  for (int slot : ready) agreed.ready.Set(slot);
  for (int slot : invalidate) agreed.invalidate.Set(slot);
  return agreed;
}

std::vector<std::string> Names(const std::vector<RequestMeta>& requests) {
  std::vector<std::string> names;
  for (const RequestMeta& r : requests) names.push_back(r.name);
  return names;
}

// A cache of 4 slots holding "a" (slot 0), as after its first negotiated run.
struct Fixture {
  Counters counters;
  CacheCoordination cache{4, &counters};
  Clock::time_point t0 = Clock::now();

  Fixture() {
    RequestMeta a = Meta("a");
    cache.Remember(Executed("a"), &a);
  }
  SlotBits Sort(RequestMeta meta, Clock::time_point at) {
    SlotBits invalidate(cache.capacity());
    cache.Sort(std::move(meta), at, &invalidate);
    return invalidate;
  }
  CycleFlags Mine(Clock::time_point at, SlotBits invalidate = SlotBits(4)) {
    CycleFlags mine;
    cache.Contribute(at, std::move(invalidate), &mine);
    return mine;
  }
};

TEST(CacheCoordinationTest, AMissGoesToTheCoordinator) {
  Fixture f;
  f.Sort(Meta("b"), f.t0);
  EXPECT_TRUE(f.cache.has_unsent());
  EXPECT_EQ(Names(f.cache.TakeUnsent()), std::vector<std::string>{"b"});
  EXPECT_FALSE(f.cache.has_unsent());
  EXPECT_EQ(f.counters.Get(kCacheMisses), 1);
}

TEST(CacheCoordinationTest, AHitWaitsUntilEveryRankHasItReady) {
  Fixture f;
  EXPECT_FALSE(f.Mine(f.t0).ready.Test(0));  // not submitted here yet
  SlotBits invalidate = f.Sort(Meta("a"), f.t0);
  EXPECT_FALSE(invalidate.Any());
  EXPECT_FALSE(f.cache.has_unsent());
  EXPECT_EQ(f.counters.Get(kCacheHits), 1);
  EXPECT_TRUE(f.Mine(f.t0).ready.Test(0));

  std::vector<int> slots;
  f.cache.ApplyAgreed(Agreed(4, {}), &slots);  // another rank is not ready
  EXPECT_TRUE(slots.empty());
  f.cache.ApplyAgreed(Agreed(4, {0}), &slots);
  ASSERT_EQ(slots, std::vector<int>{0});
  EXPECT_EQ(f.cache.response(slots[0]).names[0], "a");
  EXPECT_FALSE(f.Mine(f.t0).ready.Test(0));  // the wait is over
}

TEST(CacheCoordinationTest, AChangedRequestInvalidatesItsSlot) {
  Fixture f;
  SlotBits invalidate = f.Sort(Meta("a", {5}), f.t0);
  EXPECT_TRUE(invalidate.Test(0));
  EXPECT_EQ(Names(f.cache.TakeUnsent()), std::vector<std::string>{"a"});
  std::vector<int> slots;
  f.cache.ApplyAgreed(Agreed(4, {0}, {0}), &slots);
  EXPECT_TRUE(slots.empty());  // invalidation wins over readiness
  EXPECT_EQ(f.counters.Get(kCacheInvalidations), 1);
  f.Sort(Meta("a"), f.t0);  // the entry is gone: even the old request misses now
  EXPECT_EQ(Names(f.cache.TakeUnsent()), std::vector<std::string>{"a"});
}

TEST(CacheCoordinationTest, AStaleWaitIsInvalidatedAndSentToTheCoordinator) {
  Fixture f;
  f.Sort(Meta("a"), f.t0);
  EXPECT_FALSE(f.Mine(f.t0 + CacheCoordination::kStaleWait).invalidate.Test(0));
  CycleFlags late = f.Mine(f.t0 + CacheCoordination::kStaleWait + std::chrono::milliseconds(1));
  EXPECT_TRUE(late.invalidate.Test(0));
  std::vector<int> slots;
  f.cache.ApplyAgreed(Agreed(4, {}, {0}), &slots);
  EXPECT_EQ(Names(f.cache.TakeUnsent()), std::vector<std::string>{"a"});
}

TEST(CacheCoordinationTest, RanksOutsideTheSetAgreeByDefault) {
  Counters counters;
  CacheCoordination cache(2, &counters);
  cache.Remember(Executed("a"), nullptr);  // this rank is not in the response's set
  CycleFlags mine;
  cache.Contribute(Clock::now(), SlotBits(2), &mine);
  EXPECT_TRUE(mine.ready.Test(0));
}

TEST(CacheCoordinationTest, AJoinedRankSendsEveryWaitToTheCoordinator) {
  Fixture f;
  f.Sort(Meta("a"), f.t0);
  CycleFlags agreed = Agreed(4, {});
  agreed.joined = true;
  std::vector<int> slots;
  f.cache.ApplyAgreed(agreed, &slots);
  EXPECT_EQ(Names(f.cache.TakeUnsent()), std::vector<std::string>{"a"});
}

TEST(CacheCoordinationTest, TurningTheCacheOffEmptiesIt) {
  Fixture f;
  f.Sort(Meta("a"), f.t0);
  f.cache.SetEnabled(false);
  EXPECT_FALSE(f.cache.enabled());
  EXPECT_EQ(Names(f.cache.TakeUnsent()), std::vector<std::string>{"a"});
  EXPECT_FALSE(f.Mine(f.t0).ready.Any());
  RequestMeta a = Meta("a");
  f.cache.Remember(Executed("a"), &a);  // ignored while off
  f.cache.SetEnabled(true);
  f.Sort(Meta("a"), f.t0);
  EXPECT_EQ(Names(f.cache.TakeUnsent()), std::vector<std::string>{"a"});
}

TEST(CacheCoordinationTest, NoCapacityMeansNoCache) {
  Counters counters;
  CacheCoordination cache(0, &counters);
  EXPECT_FALSE(cache.enabled());
  SlotBits invalidate(0);
  cache.Sort(Meta("a"), Clock::now(), &invalidate);
  EXPECT_EQ(Names(cache.TakeUnsent()), std::vector<std::string>{"a"});
}

TEST(CacheCoordinationTest, EntriesOfARemovedSetAreForgotten) {
  Counters counters;
  CacheCoordination cache(4, &counters);
  ProcessSetRegistry sets(4);
  const int32_t id = sets.Add({0, 1});
  RequestMeta a = Meta("a");
  cache.Remember(Executed("a", id), &a);
  cache.ForgetRemovedSets(sets);
  SlotBits invalidate(4);
  cache.Sort(Meta("a"), Clock::now(), &invalidate);
  EXPECT_FALSE(cache.has_unsent());  // still cached while the set exists
  ASSERT_TRUE(sets.Remove(id));
  cache.ForgetRemovedSets(sets);
  EXPECT_EQ(Names(cache.TakeUnsent()), std::vector<std::string>{"a"});  // its wait, demoted
}

}  // namespace
}  // namespace tutti
