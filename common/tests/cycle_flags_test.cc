#include "negotiation/cycle_flags.h"

#include <gtest/gtest.h>

namespace tutti {
namespace {

std::vector<uint64_t> And(const std::vector<std::vector<uint64_t>>& ranks) {
  std::vector<uint64_t> result = ranks[0];
  for (const auto& words : ranks) {
    for (size_t i = 0; i < result.size(); ++i) result[i] &= words[i];
  }
  return result;
}

TEST(CycleFlagsTest, AnyRankFactsAreOrsAndReadinessIsAnAnd) {
  const int slots = 130;  // spans three bitmap words
  CycleFlags a, b;
  a.ready.assign(slots, false);
  b.ready.assign(slots, false);
  a.invalidate.assign(slots, false);
  b.invalidate.assign(slots, false);
  a.ready[0] = b.ready[0] = true;  // ready everywhere
  a.ready[129] = true;             // ready on one rank only
  b.invalidate[64] = true;
  a.busy = true;
  b.negotiate = true;
  CycleFlags agreed = DecodeAgreedFlags(And({EncodeFlags(a, slots), EncodeFlags(b, slots)}), slots);
  EXPECT_TRUE(agreed.negotiate);
  EXPECT_TRUE(agreed.busy);
  EXPECT_FALSE(agreed.shutdown);
  EXPECT_FALSE(agreed.joined);
  EXPECT_TRUE(agreed.ready[0]);
  EXPECT_FALSE(agreed.ready[129]);
  EXPECT_TRUE(agreed.invalidate[64]);
  int invalidated = 0;
  for (bool v : agreed.invalidate) invalidated += v;
  EXPECT_EQ(invalidated, 1);
}

TEST(CycleFlagsTest, QuietRanksAgreeOnNothing) {
  CycleFlags a;
  CycleFlags agreed = DecodeAgreedFlags(And({EncodeFlags(a, 3), EncodeFlags(a, 3)}), 3);
  EXPECT_FALSE(agreed.negotiate || agreed.busy || agreed.shutdown || agreed.joined);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(agreed.ready[i] || agreed.invalidate[i]);
}

TEST(CycleFlagsTest, WordCountGrowsWithSlots) {
  EXPECT_EQ(FlagWords(0), 1u);
  EXPECT_EQ(FlagWords(64), 3u);
  EXPECT_EQ(FlagWords(65), 5u);
  CycleFlags shut;
  shut.shutdown = shut.joined = true;
  CycleFlags agreed = DecodeAgreedFlags(EncodeFlags(shut, 0), 0);
  EXPECT_TRUE(agreed.shutdown);
  EXPECT_TRUE(agreed.joined);
}

}  // namespace
}  // namespace tutti
