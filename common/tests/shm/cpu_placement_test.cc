// Two ranks that the scheduler left taking turns on one CPU: the higher rank moves itself to
// another CPU it may run on (Group::Options::move_off_shared_cpu), and MoveOffCpu keeps the
// thread's affinity mask as it was.
#include <gtest/gtest.h>
#include <sched.h>

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

bool SameMask(const cpu_set_t& a, const cpu_set_t& b) { return CPU_EQUAL(&a, &b) != 0; }

// The calling thread's affinity mask (empty if it cannot be read).
cpu_set_t ThreadMask() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  sched_getaffinity(0, sizeof(mask), &mask);
  return mask;
}

int FirstCpu(const cpu_set_t& set) {
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) return c;
  }
  return -1;
}

// Puts the calling thread on `cpu`, then gives it `mask` back: it stays on `cpu` until the
// scheduler moves it, as after a wake-up that placed it there. False if it moved at once.
bool PlaceOn(int cpu, const cpu_set_t& mask) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) return false;
    sched_setaffinity(0, sizeof(mask), &mask);
    if (CurrentCpu() == cpu) return true;
  }
  return false;
}

constexpr char kOneCpu[] = "this process may run on one CPU only";

TEST(MoveOffCpuTest, LeavesTheCpuAndKeepsTheMask) {
  const cpu_set_t mask = ThreadMask();
  if (CPU_COUNT(&mask) < 2) GTEST_SKIP() << kOneCpu;
  const int cpu = FirstCpu(mask);
  ASSERT_TRUE(PlaceOn(cpu, mask));
  EXPECT_TRUE(MoveOffCpu(cpu));
  EXPECT_NE(CurrentCpu(), cpu);
  EXPECT_TRUE(SameMask(ThreadMask(), mask)) << "the affinity mask changed";
}

TEST(MoveOffCpuTest, RefusesWhenThereIsNowhereToGoOrTheThreadIsElsewhere) {
  const cpu_set_t mask = ThreadMask();
  if (CPU_COUNT(&mask) < 2) GTEST_SKIP() << kOneCpu;
  const int cpu = FirstCpu(mask);
  ASSERT_TRUE(PlaceOn(cpu, mask));
  int other = cpu + 1;
  while (!CPU_ISSET(other, &mask)) ++other;
  EXPECT_FALSE(MoveOffCpu(other)) << "moved although the thread was not on CPU " << other;
  EXPECT_FALSE(MoveOffCpu(-1));

  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  EXPECT_FALSE(MoveOffCpu(cpu)) << "moved off the only CPU it may use";
  EXPECT_EQ(CurrentCpu(), cpu);
  EXPECT_TRUE(SameMask(ThreadMask(), one));
  ASSERT_EQ(sched_setaffinity(0, sizeof(mask), &mask), 0);
}

// Both ranks are put on one CPU with their masks free; back-to-back tiny allreduces make
// each wait for the other. With move_off_shared_cpu, rank 1 moves away and rank 0 never
// does; without it nobody moves. The scheduler itself separates the two before they notice
// now and then: then the ranks agree to place themselves together again (at most 10 times).
// The results stay right throughout.
void RunSharingACpu(bool move) {
  const cpu_set_t mask = ThreadMask();
  if (CPU_COUNT(&mask) < 2) GTEST_SKIP() << kOneCpu;
  const int cpu = FirstCpu(mask);
  RunOptions options;
  options.same_digests = false;
  options.group.move_off_shared_cpu = move;
  std::string problems = RunGroup(
      2,
      [&](int rank, Group* g, Shared*) {
        bool moved = false;
        int attempts = 0;
        for (; attempts < 10 && !moved; ++attempts) {
          SHM_CHECK(PlaceOn(cpu, mask), "could not place rank %d on CPU %d", rank, cpu);
          SHM_CHECK(g->Barrier().ok(), "barrier");
          const uint64_t before = g->cpu_moves();
          for (int call = 0; call < 2000; ++call) {
            float x = static_cast<float>(rank + call);
            Status st = g->Allreduce(&x, 1, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
            SHM_CHECK(st.ok(), "allreduce: %s", st.message().c_str());
            SHM_CHECK(x == static_cast<float>(1 + 2 * call), "call %d: got %g", call, x);
          }
          float any = g->cpu_moves() > before ? 1.0f : 0.0f;
          SHM_CHECK(g->Allreduce(&any, 1, TUTTI_FLOAT32, TUTTI_REDUCE_MAX).ok(), "allreduce");
          moved = any > 0;
        }
        std::fprintf(stderr, "rank %d: %llu move(s) in %d placement(s) on CPU %d\n", rank,
                     static_cast<unsigned long long>(g->cpu_moves()), attempts, cpu);
        if (!move) {
          SHM_CHECK(g->cpu_moves() == 0, "moved with move_off_shared_cpu off");
          return true;
        }
        SHM_CHECK(rank == 1 || g->cpu_moves() == 0, "the lower rank moved");
        SHM_CHECK(moved, "rank 1 never moved off the CPU it shared with rank 0");
        return true;
      },
      options);
  EXPECT_EQ(problems, "");
}

TEST(ShmCpuPlacementTest, RanksSharingACpuMoveApart) { RunSharingACpu(true); }
TEST(ShmCpuPlacementTest, NobodyMovesWhenTheOptionIsOff) { RunSharingACpu(false); }

}  // namespace
}  // namespace shm
}  // namespace tutti
