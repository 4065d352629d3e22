// TUTTI_GPU_OPERATIONS, TUTTI_NUM_NCCL_STREAMS and friends, with HOROVOD_* accepted.
#include "gpu/gpu_config.h"

#include <gtest/gtest.h>

#include <map>

namespace tutti {
namespace gpu {
namespace {

Status Parse(const std::map<std::string, std::string>& vars, GpuConfig* config) {
  return ParseGpuConfig(
      [&vars](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      config);
}

TEST(GpuConfig, Defaults) {
  GpuConfig c;
  ASSERT_TRUE(Parse({}, &c).ok());
  EXPECT_EQ(c.operations, GpuOperations::kNccl);
  EXPECT_EQ(c.num_nccl_streams, 1);
}

TEST(GpuConfig, ValuesAndHorovodNames) {
  GpuConfig c;
  ASSERT_TRUE(Parse({{"HOROVOD_GPU_OPERATIONS", "MPI"}, {"TUTTI_NUM_NCCL_STREAMS", "4"}}, &c).ok());
  EXPECT_EQ(c.operations, GpuOperations::kStaged);
  EXPECT_EQ(c.num_nccl_streams, 4);
  ASSERT_TRUE(Parse({{"TUTTI_GPU_OPERATIONS", "nccl"}, {"HOROVOD_GPU_OPERATIONS", "gloo"}}, &c).ok());
  EXPECT_EQ(c.operations, GpuOperations::kNccl);  // TUTTI_* wins
}

TEST(GpuConfig, BadValuesNameTheVariable) {
  GpuConfig c;
  Status s = Parse({{"TUTTI_GPU_OPERATIONS", "fast"}}, &c);
  EXPECT_EQ(s.code(), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s.message(), "TUTTI_GPU_OPERATIONS='fast' is not one of: nccl, mpi, gloo");
  s = Parse({{"HOROVOD_NUM_NCCL_STREAMS", "0"}}, &c);
  EXPECT_EQ(s.message(), "HOROVOD_NUM_NCCL_STREAMS='0' is not a whole number from 1 to 64");
  s = Parse({{"TUTTI_NUM_NCCL_STREAMS", "2x"}}, &c);
  EXPECT_EQ(s.message(), "TUTTI_NUM_NCCL_STREAMS='2x' is not a whole number from 1 to 64");
}

}  // namespace
}  // namespace gpu
}  // namespace tutti
