// Allreduce and reducescatter of the shared-memory group in real forked processes: every
// dtype and op on 2, 3 and 4 ranks (4 oversubscribes a 2-core machine) across the tiny, small
// and pipelined paths (ordinary and streaming stores, single copy) and their boundaries,
// results equal to a rank-order reduction with the core's kernels and bit-identical on every
// rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/dtype.h"
#include "kernels/reduce_kernels.h"
#include "shm/group.h"
#include "shm/test_harness.h"

namespace tutti {
namespace shm {
namespace {

using testing::RunGroup;
using testing::RunOptions;
using testing::Shared;

const tutti_dtype kDtypes[] = {TUTTI_UINT8,   TUTTI_INT8,    TUTTI_UINT16,  TUTTI_INT16,
                               TUTTI_INT32,   TUTTI_INT64,   TUTTI_FLOAT16, TUTTI_BFLOAT16,
                               TUTTI_FLOAT32, TUTTI_FLOAT64, TUTTI_BOOL};
const tutti_reduce_op kOps[] = {TUTTI_REDUCE_SUM, TUTTI_REDUCE_MIN, TUTTI_REDUCE_MAX,
                                TUTTI_REDUCE_PRODUCT};

// Deterministic values that differ per rank, element and call; floats mix magnitudes so that
// sums depend on the order of the additions.
void Fill(tutti_dtype dtype, int rank, int64_t count, int salt, void* out) {
  DispatchDtype(dtype, [&](auto d) {
    constexpr tutti_dtype D = decltype(d)::value;
    using S = typename DtypeInfo<D>::Storage;
    S* p = static_cast<S*>(out);
    for (int64_t i = 0; i < count; ++i) {
      uint32_t h =
          static_cast<uint32_t>(i) * 2654435761u ^ static_cast<uint32_t>(rank * 40503 + salt * 977);
      h ^= h >> 13;
      h *= 0x5bd1e995u;
      h ^= h >> 15;
      const double v = static_cast<double>(h % 2001) / 100.0 - 10.0;
      const double big = (h % 7 == 0) ? v * 1e6 : v;
      if constexpr (D == TUTTI_FLOAT32) {
        p[i] = static_cast<float>(big);
      } else if constexpr (D == TUTTI_FLOAT64) {
        p[i] = big;
      } else if constexpr (D == TUTTI_FLOAT16) {
        p[i] = FloatToHalf(static_cast<float>(v));
      } else if constexpr (D == TUTTI_BFLOAT16) {
        p[i] = FloatToBFloat16(static_cast<float>(big));
      } else if constexpr (D == TUTTI_BOOL) {
        p[i] = (h % 3 == 0) ? 0 : static_cast<uint8_t>(1 + h % 2);  // any non-zero is true
      } else if constexpr (std::is_signed<S>::value) {
        p[i] = static_cast<S>(static_cast<int>(h % 19) - 9);
      } else {
        p[i] = static_cast<S>(h % 23);
      }
    }
  });
}

// The reference: every rank's data reduced in rank order with the core's kernel.
std::vector<char> Expected(tutti_dtype dtype, tutti_reduce_op op, int size, int64_t count,
                           int salt) {
  const size_t bytes = static_cast<size_t>(count) * DtypeSize(dtype);
  std::vector<char> acc(bytes), next(bytes);
  Fill(dtype, 0, count, salt, acc.data());
  for (int r = 1; r < size; ++r) {
    Fill(dtype, r, count, salt, next.data());
    ReduceInto(dtype, op, acc.data(), next.data(), static_cast<size_t>(count));
  }
  return acc;
}

// Runs one allreduce and checks it; adds the result to this rank's digest.
bool CheckAllreduce(int rank, Group* g, Shared* shared, tutti_dtype dtype, tutti_reduce_op op,
                    int64_t count, int salt) {
  const size_t bytes = static_cast<size_t>(count) * DtypeSize(dtype);
  std::vector<char> buf(bytes + 1);
  buf[bytes] = 0x5a;  // guard byte
  Fill(dtype, rank, count, salt, buf.data());
  Status st = g->Allreduce(buf.data(), count, dtype, op);
  SHM_CHECK(st.ok(), "allreduce %s op %d count %lld: %s", DtypeName(dtype), op,
            static_cast<long long>(count), st.message().c_str());
  const std::vector<char> want = Expected(dtype, op, g->size(), count, salt);
  SHM_CHECK(std::memcmp(buf.data(), want.data(), bytes) == 0,
            "allreduce %s op %d count %lld: wrong result", DtypeName(dtype), op,
            static_cast<long long>(count));
  SHM_CHECK(buf[bytes] == 0x5a, "allreduce wrote past the buffer");
  shared->digests[rank] = testing::Fnv1a(buf.data(), bytes, shared->digests[rank]);
  return true;
}

std::vector<int64_t> BoundaryCounts(const Group::Options& o, size_t es) {
  const int64_t line = static_cast<int64_t>(56 / es);       // one tiny line
  const int64_t tiny = static_cast<int64_t>(32 * 56 / es);  // the largest tiny call
  const int64_t small = static_cast<int64_t>(o.small_bytes / es);
  const int64_t chunk = static_cast<int64_t>(o.chunk_bytes / es);
  return {1,     7,         line,      line + 1, 1023,      tiny,         tiny + 1,
          small, small + 1, chunk - 1, chunk,    chunk + 1, 3 * chunk + 5};
}

// How a test's calls above small_bytes move their data.
enum class Path { kPipeline, kStreaming, kSingleCopy };

// The group options of a test: ordinary or streaming stores into the slots for every call
// above the tiny path, or the single copy for every call above small_bytes (the single
// copy's tests are skipped where the kernel forbids reading a sibling's memory).
Group::Options TestOptions(Path path) {
  Group::Options o =
      path == Path::kSingleCopy ? testing::SingleCopyOptions() : testing::SmallChunkOptions();
  o.slot_stores = Group::Options::SlotStores::kCached;
  if (path == Path::kStreaming) {
    o.single_copy = Group::Options::SingleCopy::kNever;
    o.slot_stores = Group::Options::SlotStores::kStreaming;
    o.single_copy_bytes = 1;
  }
  return o;
}
// In a child, after its calls: the path asked for ran.
bool TookPath(int rank, Group* g, Path path) {
  if (path == Path::kSingleCopy) {
    SHM_CHECK(g->single_copy_available(), "the group found single copies impossible");
    SHM_CHECK(g->single_copy_calls() > 0, "no call took the single copy");
  }
  if (path == Path::kStreaming) SHM_CHECK(g->streaming_calls() > 0, "no call streamed");
  if (path != Path::kStreaming) SHM_CHECK(g->streaming_calls() == 0, "a call streamed");
  return true;
}

void RunMatrix(int size, int ring_slots = 4, Path path = Path::kPipeline) {
  RunOptions options;
  options.group = TestOptions(path);
  options.group.ring_slots = ring_slots;
  std::string problems = RunGroup(
      size,
      [&](int rank, Group* g, Shared* shared) {
        int salt = 0;
        for (tutti_dtype dtype : kDtypes) {
          for (int64_t count : BoundaryCounts(options.group, DtypeSize(dtype))) {
            for (tutti_reduce_op op : kOps) {
              if (!CheckAllreduce(rank, g, shared, dtype, op, count, ++salt)) return false;
            }
          }
        }
        return TookPath(rank, g, path);
      },
      options);
  EXPECT_EQ(problems, "");
}

TEST(ShmAllreduceTest, EveryDtypeOpAndSizeOn2Ranks) { RunMatrix(2); }
// Also the smallest ring the skewed pipeline allows.
TEST(ShmAllreduceTest, EveryDtypeOpAndSizeOn3RanksWith3Slots) { RunMatrix(3, 3); }
TEST(ShmAllreduceTest, EveryDtypeOpAndSizeOn4RanksOversubscribed) { RunMatrix(4); }
TEST(ShmAllreduceTest, EveryDtypeOpAndSizeSingleCopyOn2Ranks) {
  SKIP_UNLESS_SINGLE_COPY_POSSIBLE();
  RunMatrix(2, 4, Path::kSingleCopy);
}
TEST(ShmAllreduceTest, EveryDtypeOpAndSizeSingleCopyOn3Ranks) {
  SKIP_UNLESS_SINGLE_COPY_POSSIBLE();
  RunMatrix(3, 3, Path::kSingleCopy);
}
TEST(ShmAllreduceTest, EveryDtypeOpAndSizeSingleCopyOn4RanksOversubscribed) {
  SKIP_UNLESS_SINGLE_COPY_POSSIBLE();
  RunMatrix(4, 4, Path::kSingleCopy);
}
// Streaming stores: odd sizes leave slot pieces that are not 16-byte aligned at either end;
// on 3 ranks, ranks 1 and 2 accumulate in private memory before they publish.
TEST(ShmAllreduceTest, EveryDtypeOpAndSizeStreamingOn2Ranks) { RunMatrix(2, 4, Path::kStreaming); }
TEST(ShmAllreduceTest, EveryDtypeOpAndSizeStreamingOn3Ranks) { RunMatrix(3, 3, Path::kStreaming); }

// Megabytes with the default chunking (several pipelined chunks per call, the ring wrapping
// many times), repeated so that slot reuse across calls is exercised.
TEST(ShmAllreduceTest, MegabytesWithDefaultOptions) {
  for (int size : {2, 3}) {
    std::string problems = RunGroup(size, [&](int rank, Group* g, Shared* shared) {
      int salt = 1000;
      for (int repeat = 0; repeat < 2; ++repeat) {
        if (!CheckAllreduce(rank, g, shared, TUTTI_FLOAT32, TUTTI_REDUCE_SUM, (3 << 20) / 4 * 3 + 3,
                            ++salt))
          return false;
        if (!CheckAllreduce(rank, g, shared, TUTTI_FLOAT16, TUTTI_REDUCE_SUM, (1 << 20) + 1,
                            ++salt))
          return false;
        if (!CheckAllreduce(rank, g, shared, TUTTI_INT64, TUTTI_REDUCE_MAX, (1 << 19) - 1, ++salt))
          return false;
      }
      return true;
    });
    EXPECT_EQ(problems, "") << size << " ranks";
  }
}

// Values whose float32 sum depends on the order: rank order gives ((1 + 1e8) - 1e8) + ... = 0
// (+ 0.5 with a fourth rank), any other grouping of the first three gives 1. Every path must
// produce exactly the rank-order value on every rank.
TEST(ShmAllreduceTest, SumsTakenInRankOrder) {
  const float values[] = {1.0f, 1e8f, -1e8f, 0.5f};
  volatile float a = values[2], b = values[1], c = values[0];
  ASSERT_NE((a + b) + c, (c + b) + a) << "the data must be order-sensitive";
  for (int cell = 0; cell < 6; ++cell) {
    const int size = 3 + cell % 2;
    const Path path = cell < 2 ? Path::kPipeline : cell < 4 ? Path::kStreaming : Path::kSingleCopy;
    if (path == Path::kSingleCopy && !testing::KernelAllowsSingleCopy()) continue;
    const float want = size == 3 ? 0.0f : 0.5f;
    RunOptions options;
    options.group = TestOptions(path);
    std::string problems = RunGroup(
        size,
        [&](int rank, Group* g, Shared* shared) {
          for (int64_t count : {int64_t{3}, int64_t{300}, int64_t{900}, int64_t{50000}}) {
            std::vector<float> buf(static_cast<size_t>(count), values[rank]);
            Status st = g->Allreduce(buf.data(), count, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
            SHM_CHECK(st.ok(), "%s", st.message().c_str());
            for (int64_t i = 0; i < count; ++i) {
              SHM_CHECK(buf[i] == want, "count %lld element %lld: %g, not the rank-order sum %g",
                        static_cast<long long>(count), static_cast<long long>(i), buf[i], want);
            }
            shared->digests[rank] =
                testing::Fnv1a(buf.data(), buf.size() * 4, shared->digests[rank]);
          }
          return TookPath(rank, g, path);
        },
        options);
    EXPECT_EQ(problems, "") << size << " ranks, path " << static_cast<int>(path);
  }
}

// ReduceScatter: uneven parts (one empty), every path; each rank gets its part of the
// rank-order reduction.
TEST(ShmAllreduceTest, ReduceScatter) {
  for (int cell = 0; cell < 6; ++cell) {
    const int size = 2 + cell % 2;
    const Path path = cell < 2 ? Path::kPipeline : cell < 4 ? Path::kStreaming : Path::kSingleCopy;
    if (path == Path::kSingleCopy && !testing::KernelAllowsSingleCopy()) continue;
    RunOptions options;
    options.group = TestOptions(path);
    options.same_digests = false;  // each rank receives another part
    std::string problems = RunGroup(
        size,
        [&](int rank, Group* g, Shared*) {
          int salt = 5000;
          for (tutti_dtype dtype : {TUTTI_FLOAT32, TUTTI_BFLOAT16, TUTTI_INT32, TUTTI_BOOL}) {
            for (int64_t part : {int64_t{1}, int64_t{5}, int64_t{3000}, int64_t{20000}}) {
              for (tutti_reduce_op op : kOps) {
                std::vector<int64_t> counts;
                for (int r = 0; r < size; ++r) counts.push_back(r == 1 ? 0 : part + r);
                int64_t total = 0, begin = 0;
                for (int r = 0; r < size; ++r) {
                  if (r == rank) begin = total;
                  total += counts[r];
                }
                const size_t es = DtypeSize(dtype);
                std::vector<char> buf(static_cast<size_t>(total) * es);
                std::vector<char> out(static_cast<size_t>(counts[rank]) * es + 1, 0x33);
                ++salt;
                Fill(dtype, rank, total, salt, buf.data());
                Status st = g->ReduceScatter(rank, buf.data(), counts, out.data(), dtype, op);
                SHM_CHECK(st.ok(), "%s", st.message().c_str());
                const std::vector<char> want = Expected(dtype, op, size, total, salt);
                SHM_CHECK(std::memcmp(out.data(), want.data() + begin * es, counts[rank] * es) == 0,
                          "reducescatter %s op %d part %lld: wrong result", DtypeName(dtype), op,
                          static_cast<long long>(part));
                SHM_CHECK(out.back() == 0x33, "reducescatter wrote past its part");
              }
            }
          }
          return TookPath(rank, g, path);
        },
        options);
    EXPECT_EQ(problems, "") << size << " ranks, path " << static_cast<int>(path);
  }
}

// AllreduceSpans: a vector cut into tensors of uneven sizes (empty ones, ones that cross chunk
// and slice boundaries), in place and into separate outputs, scaled afterwards; the results
// equal packing the tensors, a plain Allreduce and ScaleInPlace, bit for bit, on every path.
TEST(ShmAllreduceTest, SpansEqualPackedAllreduce) {
  for (int cell = 0; cell < 6; ++cell) {
    const int size = 2 + cell % 2;
    const Path path = cell < 2 ? Path::kPipeline : cell < 4 ? Path::kStreaming : Path::kSingleCopy;
    if (path == Path::kSingleCopy && !testing::KernelAllowsSingleCopy()) continue;
    RunOptions options;
    options.group = TestOptions(path);
    std::string problems = RunGroup(
        size,
        [&](int rank, Group* g, Shared* shared) {
          int salt = 9000;
          for (tutti_dtype dtype : {TUTTI_FLOAT32, TUTTI_FLOAT16, TUTTI_INT32, TUTTI_BOOL}) {
            const size_t es = DtypeSize(dtype);
            for (int64_t total : {int64_t{5}, int64_t{3000}, int64_t{20011}}) {
              for (tutti_reduce_op op : kOps) {
                for (bool in_place : {true, false}) {
                  ++salt;
                  std::vector<char> input(static_cast<size_t>(total) * es);
                  Fill(dtype, rank, total, salt, input.data());
                  std::vector<char> output = in_place ? input : std::vector<char>(input.size(), 0);
                  // Tensors of 0, 1, 2, 3, ... 0 elements, cycling, the last takes the rest.
                  std::vector<Group::Span> spans;
                  int64_t at = 0;
                  for (int i = 0; at < total; ++i) {
                    const int64_t n = std::min<int64_t>(total - at, (i * 977) % 4099);
                    char* out = output.data() + at * static_cast<int64_t>(es);
                    spans.push_back({in_place ? out : input.data() + at * static_cast<int64_t>(es),
                                     out, n});
                    at += n;
                  }
                  const double factor = dtype == TUTTI_BOOL ? 1.0 : 0.5;
                  const int divisor = dtype == TUTTI_BOOL ? 1 : size;
                  Status st = g->AllreduceSpans(spans, dtype, op, factor, divisor);
                  SHM_CHECK(st.ok(), "%s", st.message().c_str());
                  std::vector<char> want = Expected(dtype, op, size, total, salt);
                  ScaleInPlace(dtype, want.data(), static_cast<size_t>(total), factor, divisor);
                  SHM_CHECK(std::memcmp(output.data(), want.data(), want.size()) == 0,
                            "spans %s op %d total %lld in place %d: wrong result",
                            DtypeName(dtype), op, static_cast<long long>(total), in_place);
                  if (!in_place) {
                    std::vector<char> again(input.size());
                    Fill(dtype, rank, total, salt, again.data());
                    SHM_CHECK(again == input, "spans: the inputs changed");
                  }
                  shared->digests[rank] =
                      testing::Fnv1a(output.data(), output.size(), shared->digests[rank]);
                }
              }
            }
          }
          return TookPath(rank, g, path);
        },
        options);
    EXPECT_EQ(problems, "") << size << " ranks, path " << static_cast<int>(path);
  }
}

// Buffers in the group's scratch memory are reduced in place from every rank's scratch (no
// copy in), at any offset, for every path length; ReduceScatter too.
TEST(ShmAllreduceTest, ScratchBuffers) {
  for (int size : {2, 3, 4}) {
    RunOptions options;
    options.group = testing::SmallChunkOptions();
    options.group.scratch_bytes = 1 << 20;
    options.same_digests = false;
    std::string problems = RunGroup(
        size,
        [&](int rank, Group* g, Shared* shared) {
          SHM_CHECK(g->ScratchBuffer((1 << 20) + 1) == nullptr,
                    "oversized scratch request accepted");
          char* scratch = static_cast<char*>(g->ScratchBuffer(1 << 20));
          SHM_CHECK(scratch != nullptr, "no scratch buffer");
          int salt = 7000;
          for (tutti_dtype dtype : {TUTTI_FLOAT32, TUTTI_FLOAT16, TUTTI_INT64, TUTTI_BOOL}) {
            for (tutti_reduce_op op : kOps) {
              for (int64_t count : {int64_t{3}, int64_t{5000}, int64_t{60001}}) {
                const size_t es = DtypeSize(dtype);
                const size_t offset = count % 2 == 0 ? 0 : 4096 + 8;
                if (offset + count * es > (1 << 20)) continue;
                char* buf = scratch + offset;
                ++salt;
                Fill(dtype, rank, count, salt, buf);
                Status st = g->Allreduce(buf, count, dtype, op);
                SHM_CHECK(st.ok(), "%s", st.message().c_str());
                const std::vector<char> want = Expected(dtype, op, size, count, salt);
                SHM_CHECK(std::memcmp(buf, want.data(), want.size()) == 0,
                          "scratch allreduce %s op %d count %lld: wrong result", DtypeName(dtype),
                          op, static_cast<long long>(count));
                shared->digests[rank] = testing::Fnv1a(buf, want.size(), shared->digests[rank]);
              }
            }
          }
          // ReduceScatter of a scratch buffer: only this rank's part is needed.
          std::vector<int64_t> counts;
          int64_t total = 0, begin = 0;
          for (int r = 0; r < size; ++r) {
            counts.push_back(9000 + 17 * r);
            if (r == rank) begin = total;
            total += counts.back();
          }
          Fill(TUTTI_FLOAT32, rank, total, 99, scratch);
          std::vector<float> out(static_cast<size_t>(counts[rank]));
          Status st =
              g->ReduceScatter(rank, scratch, counts, out.data(), TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
          SHM_CHECK(st.ok(), "%s", st.message().c_str());
          const std::vector<char> want = Expected(TUTTI_FLOAT32, TUTTI_REDUCE_SUM, size, total, 99);
          SHM_CHECK(std::memcmp(out.data(), want.data() + begin * 4, out.size() * 4) == 0,
                    "scratch reducescatter: wrong result");
          return true;
        },
        options);
    EXPECT_EQ(problems, "") << size << " ranks";
  }
}

// One rank passing scratch memory and another a private buffer (or another offset) is an error.
TEST(ShmAllreduceTest, ScratchMismatchFails) {
  for (size_t other_offset : {size_t{0}, size_t{8192}}) {
    RunOptions options;
    options.group.scratch_bytes = 1 << 20;
    options.group.timeout_seconds = 10;
    options.same_digests = false;
    std::string problems = RunGroup(
        2,
        [&](int rank, Group* g, Shared*) {
          std::vector<float> private_buf(100000, 1.0f);
          float* buf = static_cast<float*>(g->ScratchBuffer(1 << 19));
          if (rank == 1) {
            buf = other_offset == 0 ? private_buf.data() : buf + other_offset / 4;
          }
          Status st = g->Allreduce(buf, 100000, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
          if (st.ok()) st = g->Barrier();
          SHM_CHECK(!st.ok(), "mismatched scratch use succeeded");
          return true;
        },
        options);
    EXPECT_EQ(problems, "") << other_offset;
  }
  Group::Options no_scratch;
  std::unique_ptr<Group> g;
  ASSERT_TRUE(
      Group::Create(testing::UniqueName(), 0, 1, no_scratch, [] { return Status::OK(); }, &g).ok());
  EXPECT_EQ(g->ScratchBuffer(1), nullptr);
}

}  // namespace
}  // namespace shm
}  // namespace tutti
