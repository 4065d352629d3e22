// Loading libcudart and libnccl at run time: the search order and what a user reads when the
// libraries are missing or incomplete.
#include "gpu/gpu_libraries.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace tutti {
namespace gpu {
namespace {

TEST(LoadCudaFrom, MissingLibrarySaysWhatWasTriedAndHowToFixIt) {
  CudaApi api;
  std::string error;
  EXPECT_FALSE(LoadCudaFrom({"/nonexistent/libcudart.so.13", "libcudart.so.0-missing"}, &api,
                            &error));
  EXPECT_EQ(error.find("cannot load the CUDA runtime (libcudart); tried:\n"
                       "  /nonexistent/libcudart.so.13: "),
            0u)
      << error;
  EXPECT_NE(error.find("\n  libcudart.so.0-missing: "), std::string::npos) << error;
  EXPECT_NE(error.find("pip install nvidia-cuda-runtime"), std::string::npos) << error;
  EXPECT_NE(error.find("or set TUTTI_CUDART_LIBRARY to the library's path."), std::string::npos);
}

TEST(LoadNcclFrom, ALibraryWithoutTheFunctionsIsNamed) {
  // libm opens fine but is not NCCL.
  NcclApi api;
  std::string error;
  EXPECT_FALSE(LoadNcclFrom({"libm.so.6"}, &api, &error));
  EXPECT_NE(error.find("  libm.so.6: lacks ncclGetVersion"), std::string::npos) << error;
  EXPECT_NE(error.find("TUTTI_NCCL_LIBRARY"), std::string::npos) << error;
}

TEST(Candidates, OverrideThenSonamesThenSearchPath) {
  setenv("TUTTI_GPU_LIBRARY_PATH", "/a/lib:/b/lib", 1);
  unsetenv("TUTTI_NCCL_LIBRARY");
  EXPECT_EQ(NcclCandidates(),
            (std::vector<std::string>{"libnccl.so.2", "/a/lib/libnccl.so.2", "/b/lib/libnccl.so.2",
                                      "/usr/local/cuda/lib64/libnccl.so.2"}));
  setenv("TUTTI_NCCL_LIBRARY", "/opt/nccl/libnccl.so.2", 1);
  EXPECT_EQ(NcclCandidates(), (std::vector<std::string>{"/opt/nccl/libnccl.so.2"}));
  unsetenv("TUTTI_NCCL_LIBRARY");
  unsetenv("TUTTI_GPU_LIBRARY_PATH");
  EXPECT_EQ(CudaCandidates()[0], "libcudart.so.13");
}

// The CUDA toolkit's runtime loads and answers without a GPU or a driver.
TEST(LoadCudaFrom, TheToolkitRuntimeWhereInstalled) {
  const std::string path = "/usr/local/cuda/lib64/libcudart.so.13";
  CudaApi api;
  std::string error;
  if (!LoadCudaFrom({path}, &api, &error)) GTEST_SKIP() << "no CUDA 13 toolkit here: " << error;
  EXPECT_EQ(api.path, path);
  EXPECT_GE(api.runtime_version, 13000);
  EXPECT_NE(api.MemcpyBatchAsync, nullptr);  // CUDA 13: batched fusion copies
  int count = -1;
  const cudaError result = api.GetDeviceCount(&count);
  // No GPU (or no driver) here: an error the runtime can name, never a crash.
  if (result != kCudaSuccess) {
    EXPECT_STRNE(api.GetErrorString(result), "");
  }
}

}  // namespace
}  // namespace gpu
}  // namespace tutti
