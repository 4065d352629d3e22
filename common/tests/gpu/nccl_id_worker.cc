// The NCCL unique id travelling through the real controllers (MPI or Gloo) on 2-3 ranks:
// rank 0 creates it with ncclGetUniqueId (NCCL needs no GPU for that), every rank ends with the
// same bytes; then rank 0 fails to create one and every rank gets an error instead of waiting.
// Links the core's objects (ExchangeUniqueId is internal). Exits 0 when every check passed.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/config.h"
#include "transport/transport.h"
#include "gpu/gpu_libraries.h"
#include "gpu/nccl_communicators.h"

using namespace tutti;
using namespace tutti::gpu;

int failures = 0;
#define CHECK(cond, ...)                                     \
  do {                                                       \
    if (!(cond)) {                                           \
      ++failures;                                            \
      std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                     \
      std::fprintf(stderr, "\n");                            \
    }                                                        \
  } while (0)

int main(int argc, char** argv) {
  const int expected = argc > 1 ? std::atoi(argv[1]) : 0;
  Config config;
  Status s = ParseConfig(ProcessEnv(), &config);
  std::unique_ptr<Transport> transport;
  if (s.ok()) s = CreateTransport(config, &transport);
  if (!s.ok()) {
    std::fprintf(stderr, "transport: %s\n", s.message().c_str());
    return 1;
  }
  const int rank = transport->topology().rank;
  const int size = transport->topology().size;
  if (expected > 0) CHECK(size == expected, "size %d", size);

  std::string nccl_error;
  const NcclApi* nccl = Nccl(&nccl_error);
  CHECK(nccl != nullptr, "NCCL must load for this test (tools/setup installs nvidia-nccl-cu13): %s",
        nccl_error.c_str());
  if (nccl == nullptr) return 1;
  NcclUniqueId id{};
  s = ExchangeUniqueId(
      transport.get(), TUTTI_GLOBAL_PROCESS_SET, rank,
      [nccl](NcclUniqueId* made) {
        return nccl->GetUniqueId(made) == kNcclSuccess ? Status::OK()
                                                        : Status::Internal("ncclGetUniqueId");
      },
      &id);
  CHECK(s.ok(), "exchange: %s", s.message().c_str());
  // Everyone sends its id to rank 0, which compares them.
  std::vector<std::string> all;
  s = transport->GatherToRoot(std::string(id.internal, sizeof id.internal), &all);
  CHECK(s.ok(), "gather: %s", s.message().c_str());
  std::string verdict = "ok";
  if (rank == 0) {
    CHECK(all.size() == static_cast<size_t>(size), "gathered %zu", all.size());
    bool zero = true;
    for (char c : all[0]) zero = zero && c == 0;
    if (zero) verdict = "rank 0's id is all zeros";
    for (size_t r = 1; r < all.size(); ++r) {
      if (all[r] != all[0]) verdict = "rank " + std::to_string(r) + " has another id";
    }
  }
  s = transport->BroadcastFromRoot(&verdict);
  CHECK(s.ok() && verdict == "ok", "ids: %s", verdict.c_str());

  // Rank 0 cannot make an id: nobody waits forever.
  s = ExchangeUniqueId(
      transport.get(), TUTTI_GLOBAL_PROCESS_SET, rank,
      [](NcclUniqueId*) { return Status::Internal("ncclGetUniqueId failed: no network"); }, &id);
  if (rank == 0) {
    CHECK(s.message() == "ncclGetUniqueId failed: no network", "rank 0: %s", s.message().c_str());
  } else {
    CHECK(s.message() == "the process set's rank 0 could not create an NCCL unique id",
          "rank %d: %s", rank, s.message().c_str());
  }
  std::printf("rank %d (%s, NCCL %d from %s): %s\n", rank, transport->name(), nccl->version,
              nccl->path.c_str(), failures ? "FAILED" : "all checks passed");
  transport.reset();
  return failures ? 1 : 0;
}
