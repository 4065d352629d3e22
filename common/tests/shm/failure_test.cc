// Failures of the shared-memory group in real forked processes: a peer killed mid-run (and
// left unreaped), a stopped peer, Abort, mismatched and invalid calls, ranks that disagree at
// Create. None may hang; every rank gets an error and keeps getting it; /dev/shm is left
// clean in every case (RunGroup checks that after each run).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "shm/group.h"
#include "shm/platform.h"
#include "shm/test_harness.h"

namespace tutti {
namespace shm {
namespace {

using testing::RunGroup;
using testing::RunOptions;
using testing::Shared;

bool Contains(const Status& st, const char* text) {
  return st.message().find(text) != std::string::npos;
}

// After a failure the group keeps failing, on every kind of call.
bool StaysFailed(int rank, Group* g) {
  float x = 1;
  std::vector<float> big(100000, 1.0f);
  std::vector<int64_t> counts(static_cast<size_t>(g->size()), 1);
  std::vector<float> out(counts.size());
  SHM_CHECK(!g->status().ok(), "status() is OK after a failure");
  SHM_CHECK(!g->Barrier().ok(), "barrier succeeded after a failure");
  SHM_CHECK(!g->Allreduce(&x, 1, TUTTI_FLOAT32, TUTTI_REDUCE_SUM).ok(), "tiny allreduce succeeded");
  SHM_CHECK(!g->Allreduce(big.data(), 100000, TUTTI_FLOAT32, TUTTI_REDUCE_SUM).ok(),
            "allreduce succeeded");
  SHM_CHECK(!g->Broadcast(big.data(), 400, 0).ok(), "broadcast succeeded");
  SHM_CHECK(!g->Allgatherv(&x, out.data(), counts, 4).ok(), "allgather succeeded");
  SHM_CHECK(!g->Alltoallv(out.data(), counts, big.data(), counts, 4).ok(), "alltoall succeeded");
  return true;
}

// A rank is SIGKILLed while the others run large allreduces and barriers; it stays an unreaped
// zombie. The others must fail well before their 30 s deadline (liveness check), with a
// message naming the dead rank, and stay failed.
void KillPeerDuringAllreduces(Group::Options::SingleCopy single_copy) {
  RunOptions options;
  options.group.timeout_seconds = 30;
  options.group.single_copy = single_copy;
  options.reap_last = {2};
  options.expected_exit = {0, 0, -SIGKILL};
  options.same_digests = false;
  options.parent = [](const std::vector<pid_t>& pids, Shared* shared) {
    usleep(300000);
    shared->marks[0] = NowNs();
    kill(pids[2], SIGKILL);
  };
  std::string problems = RunGroup(
      3,
      [](int rank, Group* g, Shared* shared) {
        std::vector<float> buf(1 << 20, 1.0f);
        const int64_t give_up = NowNs() + 20000000000LL;
        Status st;
        while (st.ok() && NowNs() < give_up) {
          st = g->Allreduce(buf.data(), static_cast<int64_t>(buf.size()), TUTTI_FLOAT32,
                            TUTTI_REDUCE_MAX);
          if (st.ok()) st = g->Barrier();
        }
        const double seconds = (NowNs() - shared->marks[0].load()) / 1e9;
        SHM_CHECK(!st.ok(), "no error 20 s after the peer was killed");
        std::fprintf(stderr, "rank %d: error %.3f s after the kill: %s\n", rank, seconds,
                     st.message().c_str());
        SHM_CHECK(seconds < 5, "the dead peer was noticed only after %.1f s", seconds);
        SHM_CHECK(Contains(st, "rank 2"), "the message does not name the dead rank: %s",
                  st.message().c_str());
        return StaysFailed(rank, g);
      },
      options);
  EXPECT_EQ(problems, "");
}

TEST(ShmFailureTest, KilledPeerBecomesAnErrorQuickly) {
  KillPeerDuringAllreduces(Group::Options::SingleCopy::kNever);
}
// The survivors may be reading the dead rank's memory when it dies.
TEST(ShmFailureTest, KilledPeerDuringSingleCopiesBecomesAnErrorQuickly) {
  SKIP_UNLESS_SINGLE_COPY_POSSIBLE();
  KillPeerDuringAllreduces(Group::Options::SingleCopy::kAlways);
}

// A rank stops (SIGSTOP) inside the job: alive, but never answering. The others fail at their
// 1 s deadline instead of waiting forever.
TEST(ShmFailureTest, StoppedPeerHitsTheDeadline) {
  RunOptions options;
  options.group.timeout_seconds = 1;
  options.reap_last = {1};
  options.expected_exit = {0, -SIGKILL, 0};
  options.same_digests = false;
  std::string problems = RunGroup(
      3,
      [](int rank, Group* g, Shared*) {
        std::vector<float> buf(300000, 1.0f);
        for (int i = 0; i < 3; ++i) {
          SHM_CHECK(g->Allreduce(buf.data(), 300000, TUTTI_FLOAT32, TUTTI_REDUCE_SUM).ok(),
                    "allreduce");
        }
        if (rank == 1) raise(SIGSTOP);
        Status st = g->Allreduce(buf.data(), 300000, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
        SHM_CHECK(!st.ok(), "allreduce with a stopped peer succeeded");
        SHM_CHECK(Contains(st, "not taking part"), "unexpected message: %s", st.message().c_str());
        return StaysFailed(rank, g);
      },
      options);
  EXPECT_EQ(problems, "");
}

// Abort on one rank wakes the others out of a wait with its reason.
TEST(ShmFailureTest, AbortReachesEveryRank) {
  RunOptions options;
  options.group.timeout_seconds = 30;
  options.same_digests = false;
  std::string problems = RunGroup(
      3,
      [](int rank, Group* g, Shared*) {
        if (rank == 0) {
          usleep(200000);
          g->Abort("shutting down");
          SHM_CHECK(Contains(g->status(), "shutting down"), "%s", g->status().message().c_str());
          return StaysFailed(rank, g);
        }
        int64_t start = NowNs();
        Status st = rank == 1 ? g->Barrier() : g->Broadcast(&start, 8, 0);
        SHM_CHECK(!st.ok() && Contains(st, "shutting down"), "got: %s", st.message().c_str());
        SHM_CHECK(NowNs() - start < 10000000000LL, "abort took too long to arrive");
        return StaysFailed(rank, g);
      },
      options);
  EXPECT_EQ(problems, "");
}

// Ranks that issue different calls fail (on every path) instead of exchanging garbage.
TEST(ShmFailureTest, MismatchedCallsFail) {
  struct Case {
    const char* what;
    std::function<Status(int, Group*)> call;
  };
  std::vector<float> data(200000, 1.0f);
  const std::vector<Case> cases = {
      {"tiny allreduce vs barrier",
       [&](int rank, Group* g) {
         return rank == 0 ? g->Allreduce(data.data(), 2, TUTTI_FLOAT32, TUTTI_REDUCE_SUM)
                          : g->Barrier();
       }},
      {"tiny allreduce, different dtypes",
       [&](int rank, Group* g) {
         return g->Allreduce(data.data(), 2, rank == 0 ? TUTTI_FLOAT32 : TUTTI_INT32,
                             TUTTI_REDUCE_SUM);
       }},
      {"tiny allreduce over several lines, different counts",
       [&](int rank, Group* g) {
         return g->Allreduce(data.data(), rank == 0 ? 100 : 300, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
       }},
      {"small allreduce, different ops",
       [&](int rank, Group* g) {
         return g->Allreduce(data.data(), 1000, TUTTI_FLOAT32,
                             rank == 0 ? TUTTI_REDUCE_SUM : TUTTI_REDUCE_MAX);
       }},
      {"pipelined allreduce, different counts",
       [&](int rank, Group* g) {
         return g->Allreduce(data.data(), rank == 0 ? 200000 : 150000, TUTTI_FLOAT32,
                             TUTTI_REDUCE_SUM);
       }},
      {"allreduce vs allgather",
       [&](int rank, Group* g) {
         std::vector<int64_t> counts = {5000, 5000};
         std::vector<float> out(10000);
         return rank == 0 ? g->Allreduce(data.data(), 10000, TUTTI_FLOAT32, TUTTI_REDUCE_SUM)
                          : g->Allgatherv(data.data(), out.data(), counts, 4);
       }},
      {"allgather, different counts",
       [&](int rank, Group* g) {
         std::vector<int64_t> counts = {100, rank == 0 ? 100 : 90};
         std::vector<float> out(200);
         return g->Allgatherv(data.data(), out.data(), counts, 4);
       }},
      {"equal-parts allgather (the flag exchange), different sizes",
       [&](int rank, Group* g) {
         std::vector<char> out(2 * 72);
         return g->AllgatherEqual(data.data(), out.data(), rank == 0 ? 64 : 72);
       }},
      {"alltoall, counts that do not pair up",
       [&](int rank, Group* g) {
         std::vector<int64_t> send = {10, 10}, recv = {10, rank == 0 ? 12 : 10};
         std::vector<float> out(40);
         return g->Alltoallv(data.data(), send, out.data(), recv, 4);
       }},
      {"broadcast, different sizes",
       [&](int rank, Group* g) { return g->Broadcast(data.data(), rank == 0 ? 4000 : 4004, 0); }},
  };
  // Each case on the default protocols, then with every call that can taking the single copy.
  for (int cell = 0; cell < 2 * static_cast<int>(cases.size()); ++cell) {
    const Case& c = cases[static_cast<size_t>(cell) % cases.size()];
    const bool single_copy = cell >= static_cast<int>(cases.size());
    if (single_copy && !testing::KernelAllowsSingleCopy()) break;
    RunOptions options;
    if (single_copy) options.group = testing::SingleCopyOptions();
    options.group.timeout_seconds = 10;
    options.same_digests = false;
    int64_t* noticed = testing::SharedNew<int64_t>();
    std::string problems = RunGroup(
        2,
        [&](int rank, Group* g, Shared*) {
          // The rank that checks the disagreeing parameter fails in the call; a peer whose own
          // checks pass may complete it, and fails at its next call at the latest.
          Status st = c.call(rank, g);
          if (st.ok()) st = g->Barrier();
          SHM_CHECK(!st.ok(), "%s succeeded", c.what);
          if (Contains(st, "mismatch") || Contains(st, "expects"))
            __atomic_add_fetch(noticed, 1, __ATOMIC_SEQ_CST);
          SHM_CHECK(
              Contains(st, "mismatch") || Contains(st, "expects") || Contains(st, "failed on rank"),
              "%s: unexpected message: %s", c.what, st.message().c_str());
          return StaysFailed(rank, g);
        },
        options);
    EXPECT_GE(*noticed, 1) << c.what << ": no rank reported the disagreement";
    testing::SharedDelete(noticed);
    EXPECT_EQ(problems, "") << c.what << (single_copy ? " (single copy)" : "");
  }
}

// Invalid arguments fail on the rank that passed them and, through the abort word, on its
// peers (instead of leaving them to their deadline).
TEST(ShmFailureTest, InvalidArgumentsFailEveryRank) {
  RunOptions options;
  options.group.timeout_seconds = 30;
  options.same_digests = false;
  std::string problems = RunGroup(
      3,
      [](int rank, Group* g, Shared*) {
        float x[4] = {1, 2, 3, 4};
        const int64_t start = NowNs();
        Status st =
            rank == 2 ? g->Allreduce(x, 4, TUTTI_FLOAT32, TUTTI_REDUCE_AVERAGE) : g->Barrier();
        SHM_CHECK(!st.ok(), "no error");
        if (rank == 2)
          SHM_CHECK(st.code() == TUTTI_ERR_INVALID_ARGUMENT, "%s", st.message().c_str());
        SHM_CHECK(NowNs() - start < 10000000000LL, "the error took too long to arrive");
        return StaysFailed(rank, g);
      },
      options);
  EXPECT_EQ(problems, "");

  problems = RunGroup(
      2,
      [](int rank, Group* g, Shared*) {
        int64_t v = 0;
        Status st = g->Broadcast(&v, 8, 2);
        SHM_CHECK(st.code() == TUTTI_ERR_INVALID_ARGUMENT, "root 2 of 2 accepted: %s",
                  st.message().c_str());
        return true;
      },
      options);
  EXPECT_EQ(problems, "");
}

// The segment's name is gone from /dev/shm once Create has returned everywhere, while the
// group works.
TEST(ShmFailureTest, NameIsUnlinkedRightAfterCreate) {
  std::string problems = RunGroup(2, [](int rank, Group* g, Shared* shared) {
    // Rank 0 unlinks the name before it returns from Create, so before this barrier completes.
    SHM_CHECK(g->Barrier().ok(), "barrier");
    const std::string path = std::string("/dev/shm") + shared->name;
    SHM_CHECK(access(path.c_str(), F_OK) != 0 && errno == ENOENT, "%s still exists", path.c_str());
    SHM_CHECK(g->Barrier().ok(), "barrier");
    return true;
  });
  EXPECT_EQ(problems, "");
}

// Ranks that disagree about the options fail Create on every rank, and leave nothing behind.
TEST(ShmFailureTest, DisagreeingCreateFailsEverywhere) {
  RunOptions options;
  options.expected_exit = {1, 1};  // Create failed
  options.rank_options = [](int rank, Group::Options* o) {
    if (rank == 1) o->chunk_bytes *= 2;
  };
  EXPECT_EQ(RunGroup(2, [](int, Group*, Shared*) { return true; }, options), "");
  // Ranks that disagree on single copies would disagree on the protocol of large calls.
  for (auto other : {Group::Options::SingleCopy::kNever, Group::Options::SingleCopy::kAlways}) {
    options.rank_options = [other](int rank, Group::Options* o) {
      if (rank == 1) o->single_copy = other;
    };
    EXPECT_EQ(RunGroup(2, [](int, Group*, Shared*) { return true; }, options), "");
  }

  std::unique_ptr<Group> g;
  Status st = Group::Create("no-slash", 0, 1, Group::Options(), [] { return Status::OK(); }, &g);
  EXPECT_EQ(st.code(), TUTTI_ERR_INVALID_ARGUMENT);
  st = Group::Create("/x", 3, 2, Group::Options(), [] { return Status::OK(); }, &g);
  EXPECT_EQ(st.code(), TUTTI_ERR_INVALID_ARGUMENT);
  // Sizes whose layout would wrap around 64 bits (2^62 scratch bytes on 4 ranks).
  Group::Options huge;
  huge.scratch_bytes = size_t(1) << 62;
  st = Group::Create("/x", 0, 4, huge, [] { return Status::OK(); }, &g);
  EXPECT_EQ(st.code(), TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(st.message().find("would exceed 64 TiB"), std::string::npos) << st.message();
  // A group of one works and needs no peers.
  st =
      Group::Create(testing::UniqueName(), 0, 1, Group::Options(), [] { return Status::OK(); }, &g);
  ASSERT_TRUE(st.ok()) << st.message();
  float x = 2;
  EXPECT_TRUE(g->Allreduce(&x, 1, TUTTI_FLOAT32, TUTTI_REDUCE_SUM).ok());
  EXPECT_EQ(x, 2);
  EXPECT_TRUE(g->Barrier().ok());
  g.reset();
  EXPECT_TRUE(testing::Leftovers().empty());
}

}  // namespace
}  // namespace shm
}  // namespace tutti
