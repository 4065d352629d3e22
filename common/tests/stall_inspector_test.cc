#include "negotiation/stall_inspector.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace tutti {
namespace {

using Clock = StallInspector::Clock;

// The stall times are 50 ms; the tests sleep past them (waits only grow, so nothing here
// depends on how fast the machine is).
const auto kPast = std::chrono::milliseconds(80);

RequestMeta Allreduce(const std::string& name) {
  RequestMeta m;
  m.name = name;
  m.shapes = {{4}};
  return m;
}

Config Stall(double check_seconds, bool disabled, double shutdown_seconds) {
  Config config;
  config.stall_check_seconds = check_seconds;
  config.stall_check_disabled = disabled;
  config.stall_shutdown_seconds = shutdown_seconds;
  return config;
}

// After the stall times have passed: the inspector is not due and adds nothing.
void ExpectQuietAfterTheStallTimes(StallInspector* inspector, Coordinator* coordinator) {
  std::this_thread::sleep_for(kPast);
  EXPECT_FALSE(inspector->Due(*coordinator, Clock::now()));
  ResponseList answer;
  inspector->Inspect(coordinator, Clock::now(), &answer);
  EXPECT_TRUE(answer.responses.empty());
  EXPECT_TRUE(answer.warnings.empty());
}

TEST(StallInspectorTest, NothingWaitingIsNeverDue) {
  Coordinator coordinator(2);
  StallInspector inspector(Stall(0.05, false, 0.05), Clock::now());
  ExpectQuietAfterTheStallTimes(&inspector, &coordinator);
}

TEST(StallInspectorTest, WarnsOncePerCheckTimeNamingTheMissingRanks) {
  Coordinator coordinator(3);
  StallInspector inspector(Stall(0.05, false, 0), Clock::now());
  coordinator.Submit(0, Allreduce("w"));
  EXPECT_FALSE(inspector.Due(coordinator, Clock::now()));  // not waited long enough
  std::this_thread::sleep_for(kPast);
  const auto now = Clock::now();
  EXPECT_TRUE(inspector.Due(coordinator, now));
  ResponseList answer;
  inspector.Inspect(&coordinator, now, &answer);
  ASSERT_EQ(answer.warnings.size(), 1u);
  EXPECT_NE(answer.warnings[0].find("stall: some ranks have waited more than 0.05 s"),
            std::string::npos) << answer.warnings[0];
  EXPECT_NE(answer.warnings[0].find("'w' (missing ranks 1, 2)"), std::string::npos)
      << answer.warnings[0];
  EXPECT_TRUE(answer.responses.empty());  // a warning only: the request still waits
  EXPECT_EQ(coordinator.pending(), 1u);

  // Not again within the check time, again after it.
  EXPECT_FALSE(inspector.Due(coordinator, now));
  ResponseList again;
  inspector.Inspect(&coordinator, now, &again);
  EXPECT_TRUE(again.warnings.empty());
  const auto later = now + std::chrono::milliseconds(50);
  EXPECT_TRUE(inspector.Due(coordinator, later));
  inspector.Inspect(&coordinator, later, &again);
  EXPECT_EQ(again.warnings.size(), 1u);
}

TEST(StallInspectorTest, FailsRequestsStalledPastTheShutdownTime) {
  Coordinator coordinator(2);
  StallInspector inspector(Stall(60, true, 0.05), Clock::now());
  coordinator.Submit(1, Allreduce("w"));
  std::this_thread::sleep_for(kPast);
  EXPECT_TRUE(inspector.Due(coordinator, Clock::now()));
  ResponseList answer;
  inspector.Inspect(&coordinator, Clock::now(), &answer);
  ASSERT_EQ(answer.responses.size(), 1u);
  EXPECT_EQ(answer.responses[0].kind, Response::Kind::kError);
  EXPECT_EQ(answer.responses[0].names, std::vector<std::string>{"w"});
  EXPECT_TRUE(answer.warnings.empty());  // the check itself is disabled
  EXPECT_EQ(coordinator.pending(), 0u);
}

TEST(StallInspectorTest, FailsEveryWaitingRequestInADeadlock) {
  Coordinator coordinator(2);
  StallInspector inspector(Stall(0.05, false, 0), Clock::now());
  coordinator.Submit(0, Allreduce("a"));  // each rank waits for the other's request
  coordinator.Submit(1, Allreduce("b"));
  std::this_thread::sleep_for(kPast);
  ResponseList answer;
  inspector.Inspect(&coordinator, Clock::now(), &answer);
  ASSERT_EQ(answer.responses.size(), 2u);
  for (const Response& failed : answer.responses) {
    EXPECT_EQ(failed.kind, Response::Kind::kError);
    EXPECT_NE(failed.error.find("deadlock: every rank is waiting for requests the others have "
                                "not submitted"),
              std::string::npos) << failed.error;
  }
  EXPECT_EQ(coordinator.pending(), 0u);
}

TEST(StallInspectorTest, DisabledNeitherWarnsNorFails) {
  Coordinator coordinator(2);
  StallInspector inspector(Stall(0.05, true, 0), Clock::now());
  coordinator.Submit(0, Allreduce("a"));
  coordinator.Submit(1, Allreduce("b"));
  ExpectQuietAfterTheStallTimes(&inspector, &coordinator);
  EXPECT_EQ(coordinator.pending(), 2u);
}

}  // namespace
}  // namespace tutti
