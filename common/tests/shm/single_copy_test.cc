// The single-copy protocols of the shared-memory group (single_copy.cc) in real forked
// processes: broadcast from every root, allgather of uneven parts, the agreed fallback to the
// pipeline when a rank's buffer table does not fit its slot, and the measured choice
// (SingleCopy::kAuto, SlotStores::kAuto) taking every algorithm on offer on every rank alike
// with correct results. Allreduce of every dtype, op and size over the single copy is in
// allreduce_test.cc, a peer killed during one in failure_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "shm/group.h"
#include "shm/test_harness.h"

namespace tutti {
namespace shm {
namespace {

using testing::RunGroup;
using testing::RunOptions;
using testing::Shared;

// Small integers, so that float sums are exact whatever the order.
float Value(int rank, int64_t i) { return static_cast<float>(rank * 1000 + i % 977); }

bool CheckSum(int rank, int size, const float* got, int64_t count, const char* what) {
  for (int64_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < size; ++r) want += Value(r, i);
    SHM_CHECK(got[i] == want, "%s: element %lld is %g, not %g", what, static_cast<long long>(i),
              got[i], want);
  }
  return true;
}

TEST(ShmSingleCopyTest, BroadcastFromEveryRoot) {
  SKIP_UNLESS_SINGLE_COPY_POSSIBLE();
  for (int size : {2, 3}) {
    RunOptions options;
    options.group = testing::SingleCopyOptions();
    std::string problems = RunGroup(
        size,
        [&](int rank, Group* g, Shared* shared) {
          for (int64_t bytes : {int64_t{1}, int64_t{5000}, int64_t{300007}}) {
            for (int root = 0; root < size; ++root) {
              std::vector<char> buf(static_cast<size_t>(bytes) + 1, 0);
              buf[bytes] = 0x5a;
              for (int64_t i = 0; i < bytes; ++i) {
                buf[i] = static_cast<char>(rank == root ? (i * 7 + root) % 251 : 0);
              }
              Status st = g->Broadcast(buf.data(), bytes, root);
              SHM_CHECK(st.ok(), "broadcast %lld from %d: %s", static_cast<long long>(bytes),
                        root, st.message().c_str());
              for (int64_t i = 0; i < bytes; ++i) {
                SHM_CHECK(buf[i] == static_cast<char>((i * 7 + root) % 251),
                          "broadcast %lld from %d: byte %lld wrong", static_cast<long long>(bytes),
                          root, static_cast<long long>(i));
              }
              SHM_CHECK(buf[bytes] == 0x5a, "broadcast wrote past the buffer");
              shared->digests[rank] = testing::Fnv1a(buf.data(), buf.size(), shared->digests[rank]);
            }
          }
          SHM_CHECK(g->single_copy_calls() == 3 * static_cast<uint64_t>(size),
                    "%llu of %d broadcasts took the single copy",
                    static_cast<unsigned long long>(g->single_copy_calls()), 3 * size);
          return true;
        },
        options);
    EXPECT_EQ(problems, "") << size << " ranks";
  }
}

// Allgather of uneven parts (one empty), in place and into a separate output, on 2-4 ranks.
TEST(ShmSingleCopyTest, AllgatherUnevenParts) {
  SKIP_UNLESS_SINGLE_COPY_POSSIBLE();
  for (int size : {2, 3, 4}) {
    RunOptions options;
    options.group = testing::SingleCopyOptions();
    std::string problems = RunGroup(
        size,
        [&](int rank, Group* g, Shared* shared) {
          for (int64_t base : {int64_t{3}, int64_t{70001}}) {
            for (bool in_place : {false, true}) {
              std::vector<int64_t> counts;
              int64_t total = 0, mine_at = 0;
              for (int r = 0; r < size; ++r) {
                counts.push_back(r == 1 ? 0 : base + 17 * r);
                if (r == rank) mine_at = total;
                total += counts.back();
              }
              std::vector<float> out(static_cast<size_t>(total) + 1, -1.0f);
              out.back() = 42.0f;
              std::vector<float> own(static_cast<size_t>(counts[rank]));
              for (int64_t i = 0; i < counts[rank]; ++i) own[i] = Value(rank, i);
              const float* input = own.data();
              if (in_place) {
                std::copy(own.begin(), own.end(), out.begin() + mine_at);
                input = out.data() + mine_at;
              }
              Status st = g->Allgatherv(input, out.data(), counts, 4);
              SHM_CHECK(st.ok(), "%s", st.message().c_str());
              for (int r = 0, at = 0; r < size; at += static_cast<int>(counts[r]), ++r) {
                for (int64_t i = 0; i < counts[r]; ++i) {
                  SHM_CHECK(out[at + i] == Value(r, i), "part of rank %d element %lld wrong", r,
                            static_cast<long long>(i));
                }
              }
              SHM_CHECK(out.back() == 42.0f, "allgather wrote past the output");
              shared->digests[rank] = testing::Fnv1a(out.data(), out.size() * 4, shared->digests[rank]);
            }
          }
          SHM_CHECK(g->single_copy_calls() == 4, "%llu of 4 allgathers took the single copy",
                    static_cast<unsigned long long>(g->single_copy_calls()));
          return true;
        },
        options);
    EXPECT_EQ(problems, "") << size << " ranks";
  }
}

// Rank 0 hands in more tensors than its slot can list (chunk_bytes / 24), rank 1 one tensor:
// both must take the pipeline for that call, and the single copy again for the next.
TEST(ShmSingleCopyTest, FallsBackTogetherWhenATableDoesNotFit) {
  SKIP_UNLESS_SINGLE_COPY_POSSIBLE();
  RunOptions options;
  options.group = testing::SingleCopyOptions();
  const int64_t tensors = 1000, each = 30, total = tensors * each;
  ASSERT_GT(tensors * 24, static_cast<int64_t>(options.group.chunk_bytes));
  std::string problems = RunGroup(
      2,
      [&](int rank, Group* g, Shared* shared) {
        std::vector<float> data(static_cast<size_t>(total));
        for (int64_t i = 0; i < total; ++i) data[i] = Value(rank, i);
        std::vector<Group::Span> spans;
        if (rank == 0) {
          for (int64_t t = 0; t < tensors; ++t) {
            spans.push_back({data.data() + t * each, data.data() + t * each, each});
          }
        } else {
          spans.push_back({data.data(), data.data(), total});
        }
        Status st = g->AllreduceSpans(spans, TUTTI_FLOAT32, TUTTI_REDUCE_SUM, 1.0, 1);
        SHM_CHECK(st.ok(), "%s", st.message().c_str());
        if (!CheckSum(rank, 2, data.data(), total, "many spans")) return false;
        SHM_CHECK(g->single_copy_calls() == 0, "a table that does not fit took the single copy");
        for (int64_t i = 0; i < total; ++i) data[i] = Value(rank, i);
        st = g->Allreduce(data.data(), total, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
        SHM_CHECK(st.ok(), "%s", st.message().c_str());
        if (!CheckSum(rank, 2, data.data(), total, "one span")) return false;
        SHM_CHECK(g->single_copy_calls() == 1, "the next call did not take the single copy");
        shared->digests[rank] = testing::Fnv1a(data.data(), data.size() * 4);
        return true;
      },
      options);
  EXPECT_EQ(problems, "");
}

// `calls` allreduces of 100003 floats (400 KB), each checked.
bool AllreduceCalls(int rank, int size, Group* g, int calls) {
  const int64_t count = 100003;
  std::vector<float> data(static_cast<size_t>(count));
  for (int c = 0; c < calls; ++c) {
    for (int64_t i = 0; i < count; ++i) data[i] = Value(rank, i);
    Status st = g->Allreduce(data.data(), count, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
    SHM_CHECK(st.ok(), "%s", st.message().c_str());
    if (!CheckSum(rank, size, data.data(), count, "allreduce")) return false;
  }
  return true;
}

// The measured choice: rank 0 (allreduce) or the root (broadcast) decides and the others
// follow; within the first calls both algorithms run, every result is right, and every rank
// counts the same single copies (the digests compare the counts).
TEST(ShmSingleCopyTest, MeasuredChoiceTakesBothAlgorithmsOnEveryRankAlike) {
  SKIP_UNLESS_SINGLE_COPY_POSSIBLE();
  for (int size : {2, 3}) {
    RunOptions options;
    options.group = testing::SmallChunkOptions();
    options.group.single_copy = Group::Options::SingleCopy::kAuto;
    options.group.single_copy_bytes = 64 * 1024;
    const int calls = 40;
    std::string problems = RunGroup(
        size,
        [&](int rank, Group* g, Shared* shared) {
          if (!AllreduceCalls(rank, size, g, calls)) return false;
          const uint64_t allreduces = g->single_copy_calls();
          const uint64_t streamed = g->streaming_calls();
          SHM_CHECK(allreduces >= 1 && streamed >= 1 && allreduces + streamed < calls,
                    "of %d allreduces, %llu took the single copy and %llu streamed: the choice "
                    "did not try all three algorithms", calls,
                    static_cast<unsigned long long>(allreduces),
                    static_cast<unsigned long long>(streamed));
          std::vector<char> bytes(400000);
          for (int c = 0; c < calls; ++c) {
            const int root = c % size;
            for (size_t i = 0; i < bytes.size(); ++i) {
              bytes[i] = static_cast<char>(rank == root ? (i + c) % 253 : 0);
            }
            Status st = g->Broadcast(bytes.data(), static_cast<int64_t>(bytes.size()), root);
            SHM_CHECK(st.ok(), "%s", st.message().c_str());
            for (size_t i = 0; i < bytes.size(); ++i) {
              SHM_CHECK(bytes[i] == static_cast<char>((i + c) % 253), "broadcast %d wrong", c);
            }
          }
          const uint64_t broadcasts = g->single_copy_calls() - allreduces;
          SHM_CHECK(broadcasts >= 1 && broadcasts < calls,
                    "%llu of %d broadcasts took the single copy",
                    static_cast<unsigned long long>(broadcasts), calls);
          std::vector<int64_t> parts(static_cast<size_t>(size), 30001);
          std::vector<float> gathered(static_cast<size_t>(30001 * size));
          std::vector<float> own(30001);
          for (int c = 0; c < calls; ++c) {
            for (int64_t i = 0; i < 30001; ++i) own[i] = Value(rank, i + c);
            Status st = g->Allgatherv(own.data(), gathered.data(), parts, 4);
            SHM_CHECK(st.ok(), "%s", st.message().c_str());
            for (int r = 0; r < size; ++r) {
              for (int64_t i = 0; i < 30001; ++i) {
                SHM_CHECK(gathered[r * 30001 + i] == Value(r, i + c), "allgather %d wrong", c);
              }
            }
          }
          const uint64_t allgathers = g->single_copy_calls() - allreduces - broadcasts;
          SHM_CHECK(allgathers >= 1 && allgathers < calls, "%llu of %d allgathers took the single copy",
                    static_cast<unsigned long long>(allgathers), calls);
          SHM_CHECK(g->streaming_calls() == streamed, "a broadcast or allgather streamed");
          const uint64_t counts[4] = {allreduces, streamed, broadcasts, allgathers};
          shared->digests[rank] = testing::Fnv1a(counts, sizeof(counts));
          return true;
        },
        options);
    EXPECT_EQ(problems, "") << size << " ranks";
  }
}

// Without the single copy, an allreduce still chooses between ordinary and streaming stores
// by measured time, every rank alike, in the pipeline and in the small protocol (one round);
// SlotStores::kCached never streams.
TEST(ShmSingleCopyTest, MeasuredStoresWithoutTheSingleCopy) {
  for (auto stores : {Group::Options::SlotStores::kAuto, Group::Options::SlotStores::kCached}) {
    RunOptions options;
    options.group = testing::SmallChunkOptions();
    options.group.single_copy = Group::Options::SingleCopy::kNever;
    options.group.single_copy_bytes = 64 * 1024;
    options.group.slot_stores = stores;
    const int calls = 30;
    std::string problems = RunGroup(3, [&](int rank, Group* g, Shared* shared) {
      if (!AllreduceCalls(rank, 3, g, calls)) return false;
      const uint64_t pipelined = g->streaming_calls();
      std::vector<float> small(1000);  // 4000 bytes: the small protocol's largest class
      for (int c = 0; c < calls; ++c) {
        for (int64_t i = 0; i < 1000; ++i) small[i] = Value(rank, i + c);
        Status st = g->Allreduce(small.data(), 1000, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
        SHM_CHECK(st.ok(), "%s", st.message().c_str());
        for (int64_t i = 0; i < 1000; ++i) {
          const float want = Value(0, i + c) + Value(1, i + c) + Value(2, i + c);
          SHM_CHECK(small[i] == want, "small allreduce %d: element %lld wrong", c,
                    static_cast<long long>(i));
        }
      }
      const uint64_t counts[2] = {pipelined, g->streaming_calls() - pipelined};
      for (uint64_t streamed : counts) {
        if (stores == Group::Options::SlotStores::kAuto) {
          SHM_CHECK(streamed >= 1 && streamed < calls, "%llu of %d allreduces streamed",
                    static_cast<unsigned long long>(streamed), calls);
        } else {
          SHM_CHECK(streamed == 0, "%llu allreduces streamed",
                    static_cast<unsigned long long>(streamed));
        }
      }
      SHM_CHECK(g->single_copy_calls() == 0, "a call took the single copy");
      shared->digests[rank] = testing::Fnv1a(counts, sizeof(counts));
      return true;
    }, options);
    EXPECT_EQ(problems, "") << "stores " << static_cast<int>(stores);
  }
}

// The stores are each rank's own business: ranks that disagree about them still agree on
// every call's protocol (rank 0's plan of the single copy is on every rank's offer), so
// every result is right, whichever stores each rank used.
TEST(ShmSingleCopyTest, RanksMayDisagreeOnTheStores) {
  using SlotStores = Group::Options::SlotStores;
  for (bool single_copy : {false, true}) {
    if (single_copy && !testing::KernelAllowsSingleCopy()) continue;
    RunOptions options;
    options.group = testing::SmallChunkOptions();
    options.group.single_copy =
        single_copy ? Group::Options::SingleCopy::kAuto : Group::Options::SingleCopy::kNever;
    options.group.single_copy_bytes = 64 * 1024;
    options.rank_options = [](int rank, Group::Options* o) {
      o->slot_stores = rank == 0 ? SlotStores::kAuto
                                 : rank == 1 ? SlotStores::kStreaming : SlotStores::kCached;
    };
    options.same_digests = false;  // the ranks' counts differ
    std::string problems = RunGroup(3, [&](int rank, Group* g, Shared*) {
      if (!AllreduceCalls(rank, 3, g, 30)) return false;
      if (rank == 1) SHM_CHECK(g->streaming_calls() > 0, "rank 1 never streamed");
      if (rank == 2) SHM_CHECK(g->streaming_calls() == 0, "rank 2 streamed");
      return true;
    }, options);
    EXPECT_EQ(problems, "") << "single copy " << single_copy;
  }
}

// Calls under other options between the measured ones (here, forced streaming stores) do
// not change which algorithm the measured calls take: rank 0's plan for the next call
// belongs to its set of algorithms. The first calls of a size class follow the choice's
// warm-up, which is the same in both size classes, so the measured calls of a class with
// forced calls in between stream exactly as often as those of a class without.
TEST(ShmSingleCopyTest, ForcedCallsInBetweenLeaveThePlanAlone) {
  using SlotStores = Group::Options::SlotStores;
  RunOptions options;
  options.group = testing::SmallChunkOptions();
  options.group.single_copy = Group::Options::SingleCopy::kNever;
  options.group.single_copy_bytes = 64 * 1024;
  std::string problems = RunGroup(2, [&](int rank, Group* g, Shared*) {
    const int measured = 5;
    std::vector<float> data(200003);
    auto allreduce = [&](int64_t count) {
      for (int64_t i = 0; i < count; ++i) data[i] = Value(rank, i);
      Status st = g->Allreduce(data.data(), count, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
      SHM_CHECK(st.ok(), "%s", st.message().c_str());
      return CheckSum(rank, 2, data.data(), count, "allreduce");
    };
    // One size class alone, another with a forced streaming call after each measured one.
    for (int c = 0; c < measured; ++c) {
      if (!allreduce(100003)) return false;
    }
    const uint64_t alone = g->streaming_calls();
    for (int c = 0; c < measured; ++c) {
      if (!allreduce(200003)) return false;
      g->set_slot_stores(SlotStores::kStreaming);
      const bool ok = allreduce(200003);
      g->set_slot_stores(SlotStores::kAuto);
      if (!ok) return false;
    }
    const uint64_t between = g->streaming_calls() - alone - measured;
    SHM_CHECK(alone >= 1 && alone < measured, "%llu of the first %d calls streamed",
              static_cast<unsigned long long>(alone), measured);
    SHM_CHECK(between == alone,
              "%llu of %d measured calls streamed with forced calls in between, %llu without",
              static_cast<unsigned long long>(between), measured,
              static_cast<unsigned long long>(alone));
    return true;
  }, options);
  EXPECT_EQ(problems, "");
}

// With SingleCopy::kNever no rank probes or takes it.
TEST(ShmSingleCopyTest, NeverMeansNever) {
  RunOptions options;
  options.group = testing::SingleCopyOptions();
  options.group.single_copy = Group::Options::SingleCopy::kNever;
  std::string problems = RunGroup(2, [&](int rank, Group* g, Shared*) {
    std::vector<float> data(50000);
    for (int64_t i = 0; i < 50000; ++i) data[i] = Value(rank, i);
    Status st = g->Allreduce(data.data(), 50000, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
    SHM_CHECK(st.ok(), "%s", st.message().c_str());
    SHM_CHECK(!g->single_copy_available() && g->single_copy_calls() == 0, "single copy used");
    return CheckSum(rank, 2, data.data(), 50000, "pipeline");
  }, options);
  EXPECT_EQ(problems, "");
}

}  // namespace
}  // namespace shm
}  // namespace tutti
