#include "base/config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace tutti {
namespace {

// An environment given as a map (the parser takes a lookup function, not the process env).
class Env {
 public:
  Env(std::initializer_list<std::pair<const std::string, std::string>> vars) : vars_(vars) {}
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars_.find(name);
      return it == vars_.end() ? nullptr : it->second.c_str();
    };
  }

 private:
  std::map<std::string, std::string> vars_;
};

Status Parse(const Env& env, Config* config) { return ParseConfig(env.lookup(), config); }

const Env kGlooJob = {
    {"TUTTI_GLOO_RENDEZVOUS_ADDR", "10.0.0.1"}, {"TUTTI_GLOO_RENDEZVOUS_PORT", "4242"},
    {"TUTTI_RANK", "3"}, {"TUTTI_SIZE", "4"}, {"TUTTI_LOCAL_RANK", "1"},
    {"TUTTI_LOCAL_SIZE", "2"}, {"TUTTI_CROSS_RANK", "1"}, {"TUTTI_CROSS_SIZE", "2"},
    {"TUTTI_GLOO_SECRET", "s3cret"}, {"TUTTI_GLOO_IFACE", "eth0"},
    {"TUTTI_GLOO_TIMEOUT_SECONDS", "7.5"}, {"TUTTI_CYCLE_TIME", "2.5"}};

TEST(ConfigTest, DefaultsToLocal) {
  Config config;
  ASSERT_TRUE(Parse(Env{}, &config).ok());
  EXPECT_EQ(config.controller, ControllerKind::kLocal);
  EXPECT_EQ(config.cycle_time_ms, 1.0);
  EXPECT_EQ(config.timeout_seconds, 60.0);
}

TEST(ConfigTest, MpiWhenLaunchedByMpirun) {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    Config config;
    ASSERT_TRUE(Parse(Env{{var, "2"}}, &config).ok());
    EXPECT_EQ(config.controller, ControllerKind::kMpi) << var;
  }
}

TEST(ConfigTest, GlooJob) {
  Config config;
  Status s = Parse(kGlooJob, &config);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(config.controller, ControllerKind::kGloo);
  EXPECT_EQ(config.gloo.rank, 3);
  EXPECT_EQ(config.gloo.size, 4);
  EXPECT_EQ(config.gloo.local_rank, 1);
  EXPECT_EQ(config.gloo.local_size, 2);
  EXPECT_EQ(config.gloo.cross_rank, 1);
  EXPECT_EQ(config.gloo.cross_size, 2);
  EXPECT_EQ(config.gloo.rendezvous_addr, "10.0.0.1");
  EXPECT_EQ(config.gloo.rendezvous_port, 4242);
  EXPECT_EQ(config.gloo.secret, "s3cret");
  EXPECT_EQ(config.gloo.iface, "eth0");
  EXPECT_EQ(config.timeout_seconds, 7.5);
  EXPECT_EQ(config.cycle_time_ms, 2.5);
}

TEST(ConfigTest, HorovodNamesAreAccepted) {
  Config config;
  Status s = Parse(Env{{"HOROVOD_CONTROLLER", "gloo"},
                       {"HOROVOD_GLOO_RENDEZVOUS_ADDR", "127.0.0.1"},
                       {"HOROVOD_GLOO_RENDEZVOUS_PORT", "1234"},
                       {"HOROVOD_RANK", "1"},
                       {"HOROVOD_SIZE", "2"},
                       {"HOROVOD_CYCLE_TIME", "5"}},
                   &config);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(config.controller, ControllerKind::kGloo);
  EXPECT_EQ(config.gloo.rank, 1);
  EXPECT_EQ(config.gloo.size, 2);
  EXPECT_EQ(config.cycle_time_ms, 5.0);
  // Without LOCAL_*, a job is taken to be on one host.
  EXPECT_EQ(config.gloo.local_rank, 1);
  EXPECT_EQ(config.gloo.local_size, 2);
}

TEST(ConfigTest, TuttiNameWinsOverHorovodName) {
  Config config;
  ASSERT_TRUE(Parse(Env{{"TUTTI_CYCLE_TIME", "3"}, {"HOROVOD_CYCLE_TIME", "9"}}, &config).ok());
  EXPECT_EQ(config.cycle_time_ms, 3.0);
}

TEST(ConfigTest, ControllerOverridesTheLauncherGuess) {
  Config config;
  ASSERT_TRUE(Parse(Env{{"TUTTI_CONTROLLER", "mpi"}, {"TUTTI_GLOO_RENDEZVOUS_ADDR", "x"}},
                    &config).ok());
  EXPECT_EQ(config.controller, ControllerKind::kMpi);
}

TEST(ConfigTest, UnknownControllerListsTheChoices) {
  Config config;
  Status s = Parse(Env{{"TUTTI_CONTROLLER", "nccl"}}, &config);
  EXPECT_EQ(s.code(), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message().find("TUTTI_CONTROLLER='nccl'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("mpi, gloo"), std::string::npos) << s.message();
}

TEST(ConfigTest, GlooWithoutStoreSaysToUseTuttirun) {
  Config config;
  Status s = Parse(Env{{"TUTTI_CONTROLLER", "gloo"}}, &config);
  EXPECT_EQ(s.code(), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message().find("TUTTI_GLOO_RENDEZVOUS_ADDR"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("tuttirun"), std::string::npos) << s.message();
}

TEST(ConfigTest, MalformedValuesNameTheVariable) {
  struct Case {
    const char* var;
    const char* value;
  } cases[] = {{"TUTTI_RANK", "abc"},
               {"TUTTI_SIZE", "0"},
               {"TUTTI_SIZE", "2x"},
               {"TUTTI_LOCAL_RANK", "-1"},
               {"TUTTI_GLOO_RENDEZVOUS_PORT", "70000"},
               {"TUTTI_GLOO_TIMEOUT_SECONDS", "soon"},
               {"TUTTI_CYCLE_TIME", "-1"},
               {"TUTTI_SHM_SINGLE_COPY", "sometimes"},
               {"TUTTI_SHM_STREAMING_STORES", "yes"},
               {"TUTTI_RANK", "99999999999999999999"}};
  for (const Case& c : cases) {
    std::map<std::string, std::string> vars = {{"TUTTI_GLOO_RENDEZVOUS_ADDR", "127.0.0.1"},
                                               {"TUTTI_GLOO_RENDEZVOUS_PORT", "1234"},
                                               {"TUTTI_SIZE", "2"}};
    vars[c.var] = c.value;
    EnvLookup lookup = [&vars](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
    Config config;
    Status s = ParseConfig(lookup, &config);
    EXPECT_EQ(s.code(), TUTTI_ERR_INVALID_ARGUMENT) << c.var << "=" << c.value;
    EXPECT_NE(s.message().find(std::string(c.var) + "='" + c.value + "'"), std::string::npos)
        << s.message();
  }
}

// Finite but huge values used to pass and wrap when cast to 64-bit integers (a negative
// fusion threshold, a negative cycle, a shared-memory layout that overflowed).
TEST(ConfigTest, HugeValuesAreOutOfRangeNamingTheVariableAndTheRange) {
  struct Case {
    const char* var;
    const char* value;
    const char* range;
  } cases[] = {
      {"TUTTI_SHM_BUFFER_BYTES", "1e19", "a number from 0 to 17179869184 (bytes)"},
      {"TUTTI_SHM_BUFFER_BYTES", "4611686018427387904", "from 0 to 17179869184"},
      {"TUTTI_FUSION_THRESHOLD", "1e19", "a number from 0 to 68719476736 (bytes)"},
      {"TUTTI_CYCLE_TIME", "1e300", "a number from 0.001 to 10000 (milliseconds)"},
      {"TUTTI_CYCLE_TIME", "inf", "from 0.001 to 10000"},
      {"TUTTI_STALL_CHECK_TIME_SECONDS", "1e300", "from 0.001 to 604800 (seconds)"},
      {"TUTTI_STALL_CHECK_TIME_SECONDS", "0", "from 0.001 to 604800"},
      {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "1e12", "from 0 to 604800"},
      {"TUTTI_GLOO_TIMEOUT_SECONDS", "1e300", "from 0.001 to 604800"},
      {"TUTTI_CACHE_CAPACITY", "99999999", "an integer from 0 to 1048576"},
      {"TUTTI_CACHE_CAPACITY", "99999999999999999999", "an integer from 0 to 1048576"},
      {"TUTTI_AUTOTUNE_STEPS_PER_SAMPLE", "0", "an integer from 1 to 1000000"},
      {"TUTTI_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0", "from 1e-09 to 100"},
      {"TUTTI_NUM_NCCL_STREAMS", "0", "an integer from 1 to 64"},
  };
  for (const Case& c : cases) {
    Config config;
    Status s = Parse(Env{{c.var, c.value}}, &config);
    EXPECT_EQ(s.code(), TUTTI_ERR_INVALID_ARGUMENT) << c.var << "=" << c.value;
    EXPECT_NE(s.message().find(std::string(c.var) + "='" + c.value + "' is out of range"),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find(c.range), std::string::npos) << s.message();
  }
}

TEST(ConfigTest, TheLargestValuesInRangeAreKeptExactly) {
  Config config;
  ASSERT_TRUE(Parse(Env{{"TUTTI_FUSION_THRESHOLD", "68719476736"},
                        {"TUTTI_SHM_BUFFER_BYTES", "17179869184"},
                        {"TUTTI_CYCLE_TIME", "10000"}},
                    &config)
                  .ok());
  EXPECT_EQ(config.fusion_threshold_bytes, int64_t(1) << 36);
  EXPECT_EQ(config.shm_buffer_bytes, int64_t(1) << 34);
  EXPECT_EQ(config.cycle_time_ms, 10000.0);
}

// Horovod reads switches with strtol: whole numbers, 0 off and positive on.
TEST(ConfigTest, SwitchesTakeHorovodsSpellings) {
  for (const char* on : {"1", "2", "10"}) {
    Config config;
    ASSERT_TRUE(Parse(Env{{"HOROVOD_AUTOTUNE", on}, {"TUTTI_STALL_CHECK_DISABLE", on}},
                      &config).ok());
    EXPECT_TRUE(config.autotune) << on;
    EXPECT_TRUE(config.stall_check_disabled) << on;
  }
  Config config;
  ASSERT_TRUE(Parse(Env{{"TUTTI_HIERARCHICAL_ALLREDUCE", "0"}}, &config).ok());
  EXPECT_FALSE(config.hierarchical_allreduce);
  for (const char* bad : {"true", "True", "yes", "on", "-1", "1.0", "1x"}) {
    Status s = Parse(Env{{"HOROVOD_TIMELINE_MARK_CYCLES", bad}}, &config);
    EXPECT_EQ(s.code(), TUTTI_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_EQ(s.message(), std::string("environment variable HOROVOD_TIMELINE_MARK_CYCLES='") +
                               bad + "' is not a switch: use 1 (on) or 0 (off), as Horovod does");
  }
}

TEST(ConfigTest, SharedMemoryModesTakeAutoOnOff) {
  Config config;
  ASSERT_TRUE(Parse(Env{}, &config).ok());
  EXPECT_EQ(config.shm_streaming_stores, SharedMemoryMode::kAuto);
  ASSERT_TRUE(Parse(Env{{"TUTTI_SHM_STREAMING_STORES", "on"}, {"TUTTI_SHM_SINGLE_COPY", "0"}},
                    &config).ok());
  EXPECT_EQ(config.shm_streaming_stores, SharedMemoryMode::kOn);
  EXPECT_EQ(config.shm_single_copy, SharedMemoryMode::kOff);
  ASSERT_TRUE(Parse(Env{{"TUTTI_SHM_STREAMING_STORES", "off"}}, &config).ok());
  EXPECT_EQ(config.shm_streaming_stores, SharedMemoryMode::kOff);
}

TEST(ConfigTest, ControllerNamesIgnoreCaseAsInHorovod) {
  Config config;
  ASSERT_TRUE(Parse(Env{{"HOROVOD_CONTROLLER", "MPI"}}, &config).ok());
  EXPECT_EQ(config.controller, ControllerKind::kMpi);
  ASSERT_TRUE(Parse(Env{{"HOROVOD_CONTROLLER", "GLOO"}, {"TUTTI_GLOO_RENDEZVOUS_ADDR", "h"},
                        {"TUTTI_GLOO_RENDEZVOUS_PORT", "1"}},
                    &config)
                  .ok());
  EXPECT_EQ(config.controller, ControllerKind::kGloo);
  ASSERT_TRUE(Parse(Env{{"TUTTI_CONTROLLER", "Mpi"}}, &config).ok());
  EXPECT_EQ(config.controller, ControllerKind::kMpi);
}

TEST(ConfigTest, TimelineDynamicStartsNoTimelineAtInit) {
  Config config;
  ASSERT_TRUE(Parse(Env{{"HOROVOD_TIMELINE", "DYNAMIC"}}, &config).ok());
  EXPECT_EQ(config.timeline_path, "");
  ASSERT_TRUE(Parse(Env{{"HOROVOD_TIMELINE", "/tmp/t.json"}}, &config).ok());
  EXPECT_EQ(config.timeline_path, "/tmp/t.json");
}

TEST(ConfigTest, RankMustBeBelowSize) {
  Config config;
  Status s = Parse(Env{{"TUTTI_GLOO_RENDEZVOUS_ADDR", "h"}, {"TUTTI_GLOO_RENDEZVOUS_PORT", "1"},
                       {"TUTTI_RANK", "2"}, {"TUTTI_SIZE", "2"}},
                   &config);
  EXPECT_EQ(s.code(), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message().find("TUTTI_RANK=2"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tutti
