#include "base/timeline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace tutti {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string TempPath() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/timeline_" + std::to_string(getpid()) + ".json";
}

TEST(TimelineTest, FileIsAClosedJsonArrayAfterEveryFlush) {
  const std::string path = TempPath();
  Timeline timeline(0);
  ASSERT_TRUE(timeline.Start(path).ok());
  EXPECT_EQ(Read(path), "[\n]\n");
  const auto t0 = Timeline::Clock::now();
  timeline.Span("grad \"w\"", "allreduce", t0, t0 + std::chrono::microseconds(5), "\"bytes\": 4");
  timeline.Flush(true);
  std::string text = Read(path);
  EXPECT_EQ(text.substr(text.size() - 3), "\n]\n");
  EXPECT_NE(text.find("\"thread_name\""), std::string::npos);
  EXPECT_NE(text.find("grad \\\"w\\\""), std::string::npos);  // escaped
  EXPECT_NE(text.find("\"name\": \"allreduce\", \"ph\": \"X\""), std::string::npos);
  EXPECT_NE(text.find("\"dur\": 5.000"), std::string::npos);
  timeline.Span("grad \"w\"", "negotiate", t0, t0);
  timeline.Stop();
  text = Read(path);
  EXPECT_EQ(text.substr(text.size() - 3), "\n]\n");
  EXPECT_NE(text.find("negotiate"), std::string::npos);
  // One row per tensor: the row is named once.
  EXPECT_EQ(text.find("thread_name"), text.rfind("thread_name"));
  unlink(path.c_str());
}

TEST(TimelineTest, UnwritablePathIsAClearError) {
  Timeline timeline(0);
  Status s = timeline.Start("/nonexistent-dir/trace.json");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent-dir/trace.json"), std::string::npos);
  EXPECT_FALSE(timeline.active());
}

}  // namespace
}  // namespace tutti
