#include "negotiation/response_cache.h"

#include <gtest/gtest.h>

#include <string>

namespace tutti {
namespace {

RequestMeta Meta(const std::string& name, std::vector<int64_t> shape = {4},
                 tutti_dtype dtype = TUTTI_FLOAT32) {
  RequestMeta m;
  m.name = name;
  m.dtype = dtype;
  m.shapes = {shape};
  return m;
}

Response Executed(const std::string& name, Collective collective = Collective::kAllreduce) {
  Response r;
  r.collective = collective;
  r.names = {name};
  return r;
}

TEST(ResponseCacheTest, HitOnlyForTheSameRequest) {
  ResponseCache cache(4);
  int slot = -1, evicted = -1;
  RequestMeta a = Meta("a");
  EXPECT_EQ(cache.Find(a, &slot), ResponseCache::Lookup::kMiss);
  cache.Put(Executed("a"), &a, &evicted);
  EXPECT_EQ(evicted, -1);
  EXPECT_EQ(cache.Find(a, &slot), ResponseCache::Lookup::kHit);
  EXPECT_EQ(slot, 0);
  EXPECT_EQ(cache.Find(Meta("a", {5}), &slot), ResponseCache::Lookup::kChanged);
  EXPECT_EQ(cache.Find(Meta("a", {4}, TUTTI_FLOAT16), &slot), ResponseCache::Lookup::kChanged);
  RequestMeta scaled = a;
  scaled.prescale = 0.5;
  EXPECT_EQ(cache.Find(scaled, &slot), ResponseCache::Lookup::kChanged);
}

TEST(ResponseCacheTest, NonMembersNeverHit) {
  ResponseCache cache(2);
  int slot = -1, evicted = -1;
  cache.Put(Executed("a"), nullptr, &evicted);
  EXPECT_TRUE(cache.Occupied(0));
  EXPECT_FALSE(cache.Member(0));
  EXPECT_EQ(cache.Find(Meta("a"), &slot), ResponseCache::Lookup::kChanged);
}

TEST(ResponseCacheTest, EvictsTheLeastRecentlyUsedSlot) {
  ResponseCache cache(2);
  int evicted = -1, slot = -1;
  RequestMeta a = Meta("a"), b = Meta("b"), c = Meta("c");
  cache.Put(Executed("a"), &a, &evicted);
  cache.Put(Executed("b"), &b, &evicted);
  cache.Touch(0);  // a ran again: b is now the oldest
  cache.Put(Executed("c"), &c, &evicted);
  EXPECT_EQ(evicted, 1);
  EXPECT_EQ(cache.Find(b, &slot), ResponseCache::Lookup::kMiss);
  EXPECT_EQ(cache.Find(c, &slot), ResponseCache::Lookup::kHit);
  EXPECT_EQ(slot, 1);
  EXPECT_EQ(cache.size(), 2);
}

TEST(ResponseCacheTest, OneOffsAndErrorsAreNotCached) {
  ResponseCache cache(4);
  int evicted = -1;
  RequestMeta m = Meta("x");
  cache.Put(Executed("x", Collective::kBarrier), &m, &evicted);
  Response error = Executed("y");
  error.kind = Response::Kind::kError;
  cache.Put(error, &m, &evicted);
  Response joined = Executed("z");
  joined.joined_ranks = {1};
  cache.Put(joined, &m, &evicted);
  EXPECT_EQ(cache.size(), 0);
}

TEST(ResponseCacheTest, EraseAndClearFreeSlots) {
  ResponseCache cache(2);
  int evicted = -1, slot = -1;
  RequestMeta a = Meta("a");
  Response on_set = Executed("a");
  on_set.process_set = 3;
  cache.Put(on_set, &a, &evicted);
  EXPECT_EQ(cache.SlotsOfSet(3), std::vector<int>{0});
  cache.Erase(0);
  EXPECT_EQ(cache.Find(a, &slot), ResponseCache::Lookup::kMiss);
  cache.Put(Executed("a"), &a, &evicted);
  cache.Clear();
  EXPECT_EQ(cache.size(), 0);
  EXPECT_FALSE(cache.Occupied(0));
}

TEST(ResponseCacheTest, ZeroCapacityCachesNothing) {
  ResponseCache cache(0);
  int evicted = -1, slot = -1;
  RequestMeta a = Meta("a");
  cache.Put(Executed("a"), &a, &evicted);
  EXPECT_EQ(cache.Find(a, &slot), ResponseCache::Lookup::kMiss);
}

}  // namespace
}  // namespace tutti
