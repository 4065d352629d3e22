// Broadcast, allgatherv, alltoallv and barrier of the shared-memory group in real forked
// processes on 2, 3 and 4 ranks: every root, uneven and empty parts, sizes around the
// cache-line and chunk boundaries and over many chunks, and all of them interleaved.
#include <gtest/gtest.h>
#include <unistd.h>

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

// Bytes that depend on (key, position, salt).
std::vector<char> Bytes(int key, int64_t n, int salt) {
  std::vector<char> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint32_t h =
        static_cast<uint32_t>(i) * 2654435761u ^ static_cast<uint32_t>(key * 7919 + salt * 104729);
    h ^= h >> 15;
    v[static_cast<size_t>(i)] = static_cast<char>(h * 0x2c1b3c6du >> 24);
  }
  return v;
}

void Digest(Shared* shared, int rank, const void* data, size_t n) {
  shared->digests[rank] = testing::Fnv1a(data, n, shared->digests[rank]);
}

bool CheckBroadcast(int rank, Group* g, Shared* shared, int root, int64_t bytes, int salt) {
  std::vector<char> buf = Bytes(rank, bytes, salt);
  buf.push_back(0x11);
  Status st = g->Broadcast(buf.data(), bytes, root);
  SHM_CHECK(st.ok(), "broadcast: %s", st.message().c_str());
  const std::vector<char> want = Bytes(root, bytes, salt);
  SHM_CHECK(std::memcmp(buf.data(), want.data(), static_cast<size_t>(bytes)) == 0,
            "broadcast of %lld bytes from %d: wrong data", static_cast<long long>(bytes), root);
  SHM_CHECK(buf.back() == 0x11, "broadcast wrote past the buffer");
  Digest(shared, rank, buf.data(), static_cast<size_t>(bytes));
  return true;
}

bool CheckAllgather(int rank, Group* g, Shared* shared, int64_t base, size_t es, int salt,
                    bool in_place, bool equal = false) {
  const int size = g->size();
  std::vector<int64_t> counts;
  for (int r = 0; r < size; ++r) counts.push_back(equal ? base : r == 1 ? 0 : base + 3 * r);
  std::vector<char> want;
  int64_t mine_at = 0;
  for (int r = 0; r < size; ++r) {
    if (r == rank) mine_at = static_cast<int64_t>(want.size());
    const std::vector<char> part = Bytes(r, counts[r] * static_cast<int64_t>(es), salt);
    want.insert(want.end(), part.begin(), part.end());
  }
  std::vector<char> out(want.size() + 1, 0x22);
  std::vector<char> in = Bytes(rank, counts[rank] * static_cast<int64_t>(es), salt);
  const void* input = in.data();
  if (in_place) {
    std::memcpy(out.data() + mine_at, in.data(), in.size());
    input = out.data() + mine_at;
  }
  // Equal parts go through AllgatherEqual (the flag exchange's entry), the rest Allgatherv.
  Status st = equal ? g->AllgatherEqual(input, out.data(), base * static_cast<int64_t>(es))
                    : g->Allgatherv(input, out.data(), counts, es);
  SHM_CHECK(st.ok(), "allgather: %s", st.message().c_str());
  SHM_CHECK(std::memcmp(out.data(), want.data(), want.size()) == 0,
            "allgather base %lld es %zu%s: wrong data", static_cast<long long>(base), es,
            in_place ? " in place" : "");
  SHM_CHECK(out.back() == 0x22, "allgather wrote past the output");
  Digest(shared, rank, out.data(), want.size());
  return true;
}

// Elements rank `from` sends to rank `to`: uneven, some zero.
int64_t A2aCount(int from, int to, int64_t base) {
  if (base == 0 || (from + 2 * to) % 5 == 3) return 0;
  return base + from * 2 + to * 3;
}

bool CheckAlltoall(int rank, Group* g, int64_t base, size_t es, int salt) {
  const int size = g->size();
  const int64_t e = static_cast<int64_t>(es);
  std::vector<int64_t> send(size), recv(size);
  std::vector<char> in, want;
  for (int j = 0; j < size; ++j) {
    send[j] = A2aCount(rank, j, base);
    recv[j] = A2aCount(j, rank, base);
    const std::vector<char> out_block = Bytes(rank * 64 + j, send[j] * e, salt);
    in.insert(in.end(), out_block.begin(), out_block.end());
    const std::vector<char> in_block = Bytes(j * 64 + rank, recv[j] * e, salt);
    want.insert(want.end(), in_block.begin(), in_block.end());
  }
  std::vector<char> out(want.size() + 1, 0x44);
  Status st = g->Alltoallv(in.data(), send, out.data(), recv, es);
  SHM_CHECK(st.ok(), "alltoall: %s", st.message().c_str());
  SHM_CHECK(std::memcmp(out.data(), want.data(), want.size()) == 0,
            "alltoall base %lld es %zu: wrong data", static_cast<long long>(base), es);
  SHM_CHECK(out.back() == 0x44, "alltoall wrote past the output");
  return true;
}

void RunAll(int size) {
  RunOptions options;
  options.group = testing::SmallChunkOptions();
  std::string problems = RunGroup(
      size,
      [&](int rank, Group* g, Shared* shared) {
        int salt = 0;
        const int64_t chunk = static_cast<int64_t>(options.group.chunk_bytes);
        for (int root = 0; root < size; ++root) {
          for (int64_t bytes : {int64_t{1}, int64_t{56}, int64_t{57}, int64_t{4095}, chunk - 1,
                                chunk, chunk + 1, 5 * chunk + 17}) {
            if (!CheckBroadcast(rank, g, shared, root, bytes, ++salt)) return false;
          }
        }
        for (size_t es : {size_t{1}, size_t{2}, size_t{4}, size_t{8}}) {
          for (int64_t base : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{1000}, int64_t{9000}}) {
            if (!CheckAllgather(rank, g, shared, base, es, ++salt, false)) return false;
            if (!CheckAlltoall(rank, g, base, es, ++salt)) return false;
          }
        }
        if (!CheckAllgather(rank, g, shared, 3000, 4, ++salt, true)) return false;
        // Equal parts up to 1792 bytes travel in flagged cache lines; one more byte does not.
        for (int64_t bytes : {int64_t{1}, int64_t{56}, int64_t{57}, int64_t{264}, int64_t{1792},
                              int64_t{1793}}) {
          for (bool in_place : {false, true}) {
            if (!CheckAllgather(rank, g, shared, bytes, 1, ++salt, in_place, true)) return false;
          }
        }
        return true;
      },
      options);
  EXPECT_EQ(problems, "");
}

TEST(ShmCollectivesTest, On2Ranks) { RunAll(2); }
TEST(ShmCollectivesTest, On3Ranks) { RunAll(3); }
TEST(ShmCollectivesTest, On4RanksOversubscribed) { RunAll(4); }

// Nobody leaves a barrier before everyone has entered it (ranks arrive at different times).
TEST(ShmCollectivesTest, BarrierWaitsForEveryone) {
  for (int size : {2, 3, 4}) {
    std::string problems = RunGroup(size, [&](int rank, Group* g, Shared* shared) {
      for (int round = 1; round <= 3; ++round) {
        if (rank == round % size) usleep(30000);  // a late rank
        shared->marks[rank * 4 + round] = round;
        Status st = g->Barrier();
        SHM_CHECK(st.ok(), "barrier: %s", st.message().c_str());
        for (int j = 0; j < size; ++j) {
          SHM_CHECK(shared->marks[j * 4 + round].load() == round,
                    "left barrier %d before rank %d entered it", round, j);
        }
      }
      return true;
    });
    EXPECT_EQ(problems, "") << size << " ranks";
  }
}

// Every kind of call interleaved many times, so that the slot ring and the alternating tiny
// lines are reused across kinds.
TEST(ShmCollectivesTest, InterleavedCalls) {
  RunOptions options;
  options.group = testing::SmallChunkOptions();
  std::string problems = RunGroup(
      3,
      [&](int rank, Group* g, Shared* shared) {
        for (int i = 0; i < 60; ++i) {
          switch (i % 6) {
            case 0:
              if (!CheckBroadcast(rank, g, shared, i % 3, 100 + 997 * i, i)) return false;
              break;
            case 1:
              if (!CheckAllgather(rank, g, shared, 7 * i, 4, i, false)) return false;
              break;
            case 2:
              if (!CheckAlltoall(rank, g, 13 * i, 2, i)) return false;
              break;
            case 3: {
              int32_t v = rank + i;
              Status st = g->Allreduce(&v, 1, TUTTI_INT32, TUTTI_REDUCE_SUM);
              SHM_CHECK(st.ok() && v == 3 * i + 3, "tiny allreduce %d: %d", i, v);
              break;
            }
            case 4: {
              std::vector<double> v(static_cast<size_t>(200 * i + 1), rank + 0.25);
              Status st = g->Allreduce(v.data(), static_cast<int64_t>(v.size()), TUTTI_FLOAT64,
                                       TUTTI_REDUCE_MAX);
              SHM_CHECK(st.ok() && v.front() == 2.25 && v.back() == 2.25, "allreduce max %d", i);
              break;
            }
            default: {
              Status st = g->Barrier();
              SHM_CHECK(st.ok(), "barrier: %s", st.message().c_str());
            }
          }
        }
        return true;
      },
      options);
  EXPECT_EQ(problems, "");
}

}  // namespace
}  // namespace shm
}  // namespace tutti
