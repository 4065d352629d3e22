#include "shm/spin_advisor.h"

#include <gtest/gtest.h>

namespace tutti {
namespace shm {
namespace {

using Outcome = SpinAdvisor::Outcome;

TEST(SpinAdvisorTest, SpinsUntilTwoSpinsInARowWereUseless) {
  SpinAdvisor advisor;
  EXPECT_TRUE(advisor.ShouldSpin());
  advisor.Record(Outcome::kAtFirstYields);
  EXPECT_TRUE(advisor.ShouldSpin());
  advisor.Record(Outcome::kDuringSpin);  // the peer runs elsewhere after all: start over
  advisor.Record(Outcome::kAtFirstYields);
  EXPECT_FALSE(advisor.skipping());
  advisor.Record(Outcome::kLater);  // a long wait changes nothing
  advisor.Record(Outcome::kAtFirstYields);
  EXPECT_TRUE(advisor.skipping());
  EXPECT_FALSE(advisor.ShouldSpin());
}

TEST(SpinAdvisorTest, ProbesEveryFewWaitsAndSpinsAgainOnceTheRanksAreApart) {
  SpinAdvisor advisor;
  advisor.Record(Outcome::kAtFirstYields);
  advisor.Record(Outcome::kAtFirstYields);
  int probes = 0;
  for (uint32_t wait = 1; wait <= 3 * SpinAdvisor::kProbeEvery; ++wait) {
    if (advisor.ShouldSpin()) {
      ++probes;
      advisor.Record(Outcome::kAtFirstYields);  // still sharing a CPU
    }
  }
  EXPECT_EQ(probes, 3);
  EXPECT_TRUE(advisor.skipping());
  for (uint32_t wait = 1; wait < SpinAdvisor::kProbeEvery; ++wait) {
    EXPECT_FALSE(advisor.ShouldSpin());
  }
  EXPECT_TRUE(advisor.ShouldSpin());
  advisor.Record(Outcome::kDuringSpin);
  EXPECT_FALSE(advisor.skipping());
  EXPECT_TRUE(advisor.ShouldSpin());
}

}  // namespace
}  // namespace shm
}  // namespace tutti
