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
  a.ready = b.ready = a.invalidate = b.invalidate = SlotBits(slots);
  a.ready.Set(0);  // ready everywhere
  b.ready.Set(0);
  a.ready.Set(129);  // ready on one rank only
  b.invalidate.Set(64);
  a.busy = true;
  b.negotiate = true;
  CycleFlags agreed = DecodeAgreedFlags(And({EncodeFlags(a, slots), EncodeFlags(b, slots)}), slots);
  EXPECT_TRUE(agreed.negotiate);
  EXPECT_TRUE(agreed.busy);
  EXPECT_FALSE(agreed.busy_everywhere);  // b has nothing in flight
  EXPECT_FALSE(agreed.shutdown);
  EXPECT_FALSE(agreed.joined);
  EXPECT_TRUE(agreed.ready.Test(0));
  EXPECT_FALSE(agreed.ready.Test(129));
  EXPECT_TRUE(agreed.invalidate.Test(64));
  EXPECT_EQ(agreed.invalidate.Count(), 1);
  EXPECT_EQ(agreed.ready.Count(), 1);
  std::vector<int> listed;
  agreed.invalidate.ForEach([&](int slot) { listed.push_back(slot); });
  EXPECT_EQ(listed, std::vector<int>{64});
}

TEST(CycleFlagsTest, BusyEverywhereNeedsEveryRank) {
  CycleFlags a, b, c;
  a.busy = b.busy = c.busy = true;
  CycleFlags agreed =
      DecodeAgreedFlags(And({EncodeFlags(a, 1), EncodeFlags(b, 1), EncodeFlags(c, 1)}), 1);
  EXPECT_TRUE(agreed.busy && agreed.busy_everywhere);
  EXPECT_FALSE(agreed.negotiate || agreed.shutdown || agreed.joined);
  c.busy = false;
  agreed = DecodeAgreedFlags(And({EncodeFlags(a, 1), EncodeFlags(b, 1), EncodeFlags(c, 1)}), 1);
  EXPECT_TRUE(agreed.busy);
  EXPECT_FALSE(agreed.busy_everywhere);
}

TEST(CycleFlagsTest, QuietRanksAgreeOnNothing) {
  CycleFlags a;
  CycleFlags agreed = DecodeAgreedFlags(And({EncodeFlags(a, 3), EncodeFlags(a, 3)}), 3);
  EXPECT_FALSE(agreed.negotiate || agreed.busy || agreed.busy_everywhere || agreed.shutdown ||
               agreed.joined);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(agreed.ready.Test(i) || agreed.invalidate.Test(i));
  EXPECT_FALSE(agreed.ready.Any() || agreed.invalidate.Any());
}

TEST(CycleFlagsTest, UsedSlotsEndAtTheLastWordInUse) {
  SlotBits bits(200);
  EXPECT_EQ(bits.UsedSlots(), 0);
  bits.Set(3);
  EXPECT_EQ(bits.UsedSlots(), 64);
  bits.Set(130);
  EXPECT_EQ(bits.UsedSlots(), 192);
  bits.Set(199);
  EXPECT_EQ(bits.UsedSlots(), 200);  // never past the set's size
  bits.Reset(199);
  bits.Reset(130);
  EXPECT_EQ(bits.UsedSlots(), 64);
  // Flags encoded for fewer slots than a rank's bitmaps hold keep only those slots.
  CycleFlags mine;
  mine.ready = SlotBits(200);
  mine.ready.Set(3);
  mine.ready.Set(130);
  CycleFlags agreed = DecodeAgreedFlags(EncodeFlags(mine, 64), 64);
  EXPECT_TRUE(agreed.ready.Test(3));
  EXPECT_FALSE(agreed.ready.Test(130));
  EXPECT_EQ(EncodeFlags(mine, 64).size(), FlagWords(64));
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
