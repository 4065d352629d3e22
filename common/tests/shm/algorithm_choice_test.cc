// The measured choice among two or three algorithms (shm/algorithm_choice.h) on made-up
// timings: it tries each, keeps the fastest, tries the others again (kTryCalls calls in a
// row, in turn) at growing intervals, follows a change of phase within a few calls, and is
// not held to a wrong choice by one slow call of a try.
#include "shm/algorithm_choice.h"

#include <gtest/gtest.h>

#include <string>

namespace tutti {
namespace shm {
namespace {

constexpr size_t kBytes = 16 << 20;

// Runs `calls` calls, algorithm a taking ns[a]; returns how many took algorithm 1.
int RunCalls(AlgorithmChoice* choice, int calls, const int64_t ns[2]) {
  int ones = 0;
  for (int i = 0; i < calls; ++i) {
    const int a = choice->Next(kBytes);
    choice->Record(kBytes, a, ns[a]);
    ones += a;
  }
  return ones;
}

TEST(AlgorithmChoiceTest, TriesBothThenKeepsTheFaster) {
  AlgorithmChoice choice;
  // Each algorithm's first call only warms it up: a slow first pipeline call (page faults)
  // does not make the other look faster.
  EXPECT_EQ(choice.Next(kBytes), 0);
  choice.Record(kBytes, 0, 50000000);
  EXPECT_EQ(choice.Next(kBytes), 0);
  choice.Record(kBytes, 0, 2000000);
  EXPECT_EQ(choice.Next(kBytes), 1);
  choice.Record(kBytes, 1, 3000000);
  EXPECT_EQ(choice.Next(kBytes), 1);
  choice.Record(kBytes, 1, 5000000);
  for (int i = 0; i < AlgorithmChoice::kMinInterval - 1; ++i) EXPECT_EQ(choice.Next(kBytes), 0);
  for (int t = 0; t < AlgorithmChoice::kTryCalls; ++t) {
    EXPECT_EQ(choice.Next(kBytes), 1) << "a try of the other after kMinInterval calls";
    choice.Record(kBytes, 1, 5000000);
  }
  // Confirmed by a wide margin (2.5x): the next try comes after four times as many calls.
  for (int i = 0; i < 4 * AlgorithmChoice::kMinInterval - 1; ++i) {
    EXPECT_EQ(choice.Next(kBytes), 0) << i;
    choice.Record(kBytes, 0, 2000000);
  }
  EXPECT_EQ(choice.Next(kBytes), 1);
}

TEST(AlgorithmChoiceTest, ANarrowMarginDoublesTheIntervalOnly) {
  AlgorithmChoice choice;
  const int64_t ns[2] = {2000000, 2400000};  // 1.2x
  RunCalls(&choice, 4, ns);  // the warm-up and first sample of each
  int calls_until_try = 0;
  for (int round = 0; round < 2; ++round) {
    calls_until_try = 0;
    int a;
    while ((a = choice.Next(kBytes)) == 0) {
      choice.Record(kBytes, 0, ns[0]);
      ++calls_until_try;
    }
    choice.Record(kBytes, a, ns[a]);
    for (int t = 1; t < AlgorithmChoice::kTryCalls; ++t) {  // the rest of the try
      ASSERT_EQ(choice.Next(kBytes), 1);
      choice.Record(kBytes, 1, ns[1]);
    }
  }
  EXPECT_EQ(calls_until_try, 2 * AlgorithmChoice::kMinInterval - 1);
}

TEST(AlgorithmChoiceTest, TriesBecomeRareOnAStableMachine) {
  AlgorithmChoice choice;
  const int64_t ns[2] = {2000000, 5000000};
  RunCalls(&choice, 200, ns);
  // After the intervals grew to the maximum, at most one try in kMaxInterval calls.
  EXPECT_LE(RunCalls(&choice, 4 * AlgorithmChoice::kMaxInterval, ns),
            4 * AlgorithmChoice::kTryCalls);
}

TEST(AlgorithmChoiceTest, FollowsAPhaseChangeEitherWay) {
  AlgorithmChoice choice;
  const int64_t fast_pipeline[2] = {2000000, 5000000};
  const int64_t slow_pipeline[2] = {10000000, 5000000};
  RunCalls(&choice, 300, fast_pipeline);
  // The pipeline slows: its own next samples overturn the choice within a few calls.
  int calls_until_switch = 0;
  while (choice.Next(kBytes) == 0 && calls_until_switch < 10) {
    choice.Record(kBytes, 0, slow_pipeline[0]);
    ++calls_until_switch;
  }
  EXPECT_LE(calls_until_switch, 2);
  choice.Record(kBytes, 1, slow_pipeline[1]);
  EXPECT_GE(RunCalls(&choice, 100, slow_pipeline),
            100 - AlgorithmChoice::kTryCalls * (100 / AlgorithmChoice::kMinInterval + 1));
  // Back to fast: found at the next try of the pipeline, at most kMaxInterval calls later
  // (the interval was reset when the choice flipped and has grown with each try since).
  const int ones = RunCalls(&choice, 200, fast_pipeline);
  EXPECT_LE(ones, AlgorithmChoice::kMaxInterval) << "stayed with the slower one";
  RunCalls(&choice, 100, fast_pipeline);  // the intervals grow back
  EXPECT_LE(RunCalls(&choice, 100, fast_pipeline), 2 * AlgorithmChoice::kTryCalls)
      << "tries only, once settled";
}

TEST(AlgorithmChoiceTest, ASlowFirstCallOfATryDoesNotHoldAWrongChoice) {
  AlgorithmChoice choice;
  const int64_t ns[2] = {2000000, 5000000};  // the pipeline is the faster
  RunCalls(&choice, 50, ns);
  // Two slow pipeline calls (say, the first of a session, after other work emptied the
  // caches) make the single copy look faster for now.
  ASSERT_EQ(choice.Next(kBytes), 0);
  choice.Record(kBytes, 0, 12000000);
  ASSERT_EQ(choice.Next(kBytes), 0);
  choice.Record(kBytes, 0, 12000000);
  ASSERT_EQ(choice.Next(kBytes), 1);
  choice.Record(kBytes, 1, ns[1]);
  int calls = 0;
  while (choice.Next(kBytes) == 1 && calls < 3 * AlgorithmChoice::kMinInterval) {
    choice.Record(kBytes, 1, ns[1]);
    ++calls;
  }
  ASSERT_LT(calls, 3 * AlgorithmChoice::kMinInterval) << "the pipeline was never tried again";
  // The try's first call is slow again; its second shows the pipeline as it is.
  choice.Record(kBytes, 0, 12000000);
  EXPECT_EQ(choice.Next(kBytes), 0) << "a try takes kTryCalls calls";
  choice.Record(kBytes, 0, ns[0]);
  EXPECT_EQ(choice.Next(kBytes), 0) << "the faster call of the try did not count";
  // Kept: the single copy comes back only for its one try (the choice changed, so the next
  // try is kMinInterval calls away; it confirms by 2.5x, so the one after waits 4x longer).
  EXPECT_EQ(RunCalls(&choice, 3 * AlgorithmChoice::kMinInterval, ns), AlgorithmChoice::kTryCalls)
      << "the pipeline was not kept";
}

TEST(AlgorithmChoiceTest, OneSlowCallIsAnOutlierTwoAreAPhase) {
  AlgorithmChoice choice;
  const int64_t ns[2] = {2000000, 5000000};
  RunCalls(&choice, 50, ns);
  ASSERT_EQ(choice.Next(kBytes), 0);
  choice.Record(kBytes, 0, 20000000);  // a preempted call
  EXPECT_EQ(choice.Next(kBytes), 0) << "one outlier flipped the choice";
  for (int i = 0; i < 2; ++i) {
    choice.Record(kBytes, 0, 2000000);
    EXPECT_EQ(choice.Next(kBytes), 0);
  }
  choice.Record(kBytes, 0, 20000000);
  EXPECT_EQ(choice.Next(kBytes), 0) << "outliers three calls apart are still outliers";
  choice.Record(kBytes, 0, 20000000);
  EXPECT_EQ(choice.Next(kBytes), 1) << "two slow calls in a row are a phase";
}

TEST(AlgorithmChoiceTest, SizeClassesAreSeparate) {
  AlgorithmChoice choice;
  for (int i = 0; i < 2; ++i) {
    choice.Record(1 << 20, 0, 100000);
    choice.Record(1 << 20, 1, 50000);
  }
  EXPECT_EQ(choice.Next(16 << 20), 0) << "16 MiB has not been measured yet";
  EXPECT_EQ(choice.Next((1 << 20) + 5), 1);
  EXPECT_GT(choice.Estimate(1 << 20, 0), choice.Estimate(1 << 20, 1));
}

// Three algorithms (the cached pipeline, the streaming pipeline, the single copy).
int RunCalls3(AlgorithmChoice* choice, int calls, const int64_t ns[3], int counts[3]) {
  int last = 0;
  for (int i = 0; i < calls; ++i) {
    last = choice->Next(kBytes, 3);
    choice->Record(kBytes, last, ns[last]);
    ++counts[last];
  }
  return last;
}

TEST(AlgorithmChoiceTest, ThreeAlgorithmsWarmUpThenTheOthersAreTriedInTurn) {
  AlgorithmChoice choice;
  const int64_t ns[3] = {2000000, 5000000, 4000000};
  for (int a = 0; a < 3; ++a) {
    for (int twice = 0; twice < 2; ++twice) {
      ASSERT_EQ(choice.Next(kBytes, 3), a);
      choice.Record(kBytes, a, ns[a]);
    }
  }
  int tries[3] = {0, 0, 0};  // runs of calls of an algorithm other than the fastest
  for (int i = 0, previous = 0; i < 300; ++i) {
    const int a = choice.Next(kBytes, 3);
    choice.Record(kBytes, a, ns[a]);
    if (a != previous) ++tries[a];
    previous = a;
  }
  EXPECT_GE(tries[1], 2) << "the second was not tried again";
  EXPECT_GE(tries[2], 2) << "the third was not tried again";
  EXPECT_LE(tries[1] + tries[2], 300 / AlgorithmChoice::kMinInterval) << "tried too often";
}

// The group plans each call one call ahead: rank 0 asks Next for the next call's algorithm
// before it records the current one, and a size class's first call takes the cached
// pipeline before any plan exists. The warm-up still takes two planned calls per algorithm
// (it took three when it counted recorded calls).
TEST(AlgorithmChoiceTest, WarmUpTakesTwoCallsEachWhenPlannedOneCallAhead) {
  AlgorithmChoice choice;
  const int64_t ns[3] = {2000000, 3000000, 4000000};
  std::string ran;
  int current = 0;  // the first call's plan: the cached pipeline
  for (int i = 0; i < 8; ++i) {
    const int next = choice.Next(kBytes, 3);
    choice.Record(kBytes, current, ns[current]);
    ran += static_cast<char>('0' + current);
    current = next;
  }
  EXPECT_EQ(ran.substr(0, 7), "0001122") << ran;
}

// The vCPUs move apart: the cached pipeline slows 4x, the streaming one keeps its speed and
// becomes the fastest; then they share a core again.
TEST(AlgorithmChoiceTest, ThreeAlgorithmsFollowThePlacementOfTheCpus) {
  AlgorithmChoice choice;
  const int64_t together[3] = {2000000, 3000000, 4000000};
  const int64_t apart[3] = {9000000, 3000000, 9000000};
  int counts[3] = {0, 0, 0};
  EXPECT_EQ(RunCalls3(&choice, 200, together, counts), 0);
  int calls_until_switch = 0;
  while (choice.Next(kBytes, 3) == 0 && calls_until_switch < 10) {
    choice.Record(kBytes, 0, apart[0]);
    ++calls_until_switch;
  }
  EXPECT_LE(calls_until_switch, 2) << "two slow calls are a phase";
  choice.Record(kBytes, 1, apart[1]);
  int during[3] = {0, 0, 0};
  RunCalls3(&choice, 200, apart, during);
  EXPECT_GE(during[1], 200 - 2 * AlgorithmChoice::kTryCalls * (200 / AlgorithmChoice::kMinInterval))
      << "kept the streaming pipeline";
  int after[3] = {0, 0, 0};
  RunCalls3(&choice, 300, together, after);
  EXPECT_GE(after[0], 300 - 2 * AlgorithmChoice::kMaxInterval) << "found the cached one again";
}

TEST(AlgorithmChoiceTest, OneAlgorithmIsNoChoice) {
  AlgorithmChoice choice;
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(choice.Next(kBytes, 1), 0);
    choice.Record(kBytes, 0, 1000000);
  }
}

TEST(AlgorithmChoiceTest, OfferingFewerAlgorithmsNeverReturnsTheOthers) {
  AlgorithmChoice choice;
  const int64_t ns[3] = {5000000, 4000000, 1000000};
  int counts[3] = {0, 0, 0};
  RunCalls3(&choice, 50, ns, counts);
  ASSERT_GT(counts[2], 40);
  for (int i = 0; i < 100; ++i) {
    const int a = choice.Next(kBytes, 2);
    ASSERT_LT(a, 2);
    choice.Record(kBytes, a, ns[a]);
  }
}

}  // namespace
}  // namespace shm
}  // namespace tutti
