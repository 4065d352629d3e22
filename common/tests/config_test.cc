#include "config.h"

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
