#include "base/collective_plan.h"

#include <gtest/gtest.h>

#include "requests/process_sets.h"

namespace tutti {
namespace {

TEST(CollectivePlanTest, ReducescatterRowsGiveExtraRowsToFirstRanks) {
  EXPECT_EQ(ReducescatterRows(7, 3), (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(ReducescatterRows(8, 3), (std::vector<int64_t>{3, 3, 2}));
  EXPECT_EQ(ReducescatterRows(6, 3), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(ReducescatterRows(1, 3), (std::vector<int64_t>{1, 0, 0}));
  EXPECT_EQ(ReducescatterRows(0, 2), (std::vector<int64_t>{0, 0}));
}

TEST(CollectivePlanTest, AlltoallReceivedSplitsAreTheMatrixColumn) {
  // Rank 0 sends 1 to itself and 2 to rank 1; rank 1 sends 3 and 4.
  const std::vector<int64_t> matrix = {1, 2, 3, 4};
  EXPECT_EQ(ReceivedSplits(matrix, 2, 0), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(ReceivedSplits(matrix, 2, 1), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(EqualSplits(6, 3), (std::vector<int64_t>{2, 2, 2}));
}

TEST(CollectivePlanTest, ElementCounts) {
  EXPECT_EQ(ElementCount({}), 1);
  EXPECT_EQ(ElementCount({2, 3, 4}), 24);
  EXPECT_EQ(RowElements({2, 3, 4}), 12);
  EXPECT_EQ(RowElements({5}), 1);
}

TEST(ProcessSetRegistryTest, AddQueryRemove) {
  ProcessSetRegistry sets(3);
  EXPECT_EQ(sets.Size(0), 3);
  EXPECT_EQ(sets.RankIn(0, 2), 2);
  const int32_t a = sets.Add({0, 2});
  const int32_t b = sets.Add({1});
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 2);
  EXPECT_EQ(sets.Size(a), 2);
  EXPECT_EQ(sets.RankIn(a, 2), 1);
  EXPECT_EQ(sets.RankIn(a, 1), -1);
  EXPECT_TRUE(sets.Remove(a));
  EXPECT_FALSE(sets.Remove(a));
  EXPECT_FALSE(sets.Remove(0));
  EXPECT_EQ(sets.Size(a), -1);
  EXPECT_EQ(sets.Add({0, 1}), 3);  // ids are never reused
}

TEST(ProcessSetRegistryTest, ValidateNamesTheProblem) {
  EXPECT_TRUE(ProcessSetRegistry::Validate({0, 2}, 3).ok());
  EXPECT_EQ(ProcessSetRegistry::Validate({}, 3).message(), "a process set needs at least one rank");
  EXPECT_EQ(ProcessSetRegistry::Validate({0, 3}, 3).message(),
            "process set rank 3 is out of range for a job of 3 ranks");
  EXPECT_EQ(ProcessSetRegistry::Validate({1, 1}, 3).message(),
            "process set ranks must be sorted and distinct");
}

}  // namespace
}  // namespace tutti
