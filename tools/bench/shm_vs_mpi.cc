// The shared-memory transport alone: tutti::shm::Group::Allreduce vs MPI_Allreduce (float32
// sum, in place), measured in the same mpirun launch, alternating blocks. Prints medians and
// ratios.
// Build: bazel build //tools/bench:shm_vs_mpi
// Run:   mpirun --allow-run-as-root -np 2 bazel-bin/tools/bench/shm_vs_mpi
// SMALL_BYTES, CHUNK_BYTES and RING_SLOTS in the environment override the Group's options.
// Only the MPI C API (the C++ bindings need libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "shm/group.h"
#include "shm/platform.h"

using tutti::Status;
using tutti::shm::Group;
using tutti::shm::NowNs;

static void CheckOk(const Status& s) {
  if (s.ok()) return;
  std::fprintf(stderr, "%s\n", s.message().c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Group::Options options;
  options.scratch_bytes = 64 << 20;
  if (const char* v = std::getenv("SMALL_BYTES")) options.small_bytes = std::strtoul(v, nullptr, 0);
  if (const char* v = std::getenv("CHUNK_BYTES")) options.chunk_bytes = std::strtoul(v, nullptr, 0);
  if (const char* v = std::getenv("RING_SLOTS")) options.ring_slots = std::atoi(v);
  std::unique_ptr<Group> group;
  auto barrier = [] {
    return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? Status::OK()
                                                      : Status::Internal("barrier");
  };
  Status st = Group::Create("/tutti-bench-" + std::to_string(getppid()), rank, size, options,
                            barrier, &group);
  if (!st.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, st.message().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::vector<size_t> sizes = {4, 1024, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
  if (rank == 0) {
    std::printf("%d ranks, float32 sum in place; median per call over interleaved blocks\n", size);
    std::printf("%10s %12s %12s %8s %14s %10s\n", "bytes", "shm us", "MPI us", "MPI/shm",
                "shm-scratch us", "MPI/scr");
  }
  for (size_t bytes : sizes) {
    const int64_t count = static_cast<int64_t>(bytes / 4);
    std::vector<float> a(count, 0.0f), b(count, 0.0f);
    // Short alternating blocks: both sides see the same background load on a shared machine.
    const int per_block = bytes <= 65536 ? 50 : (bytes <= (1 << 20) ? 5 : 1);
    const int blocks = bytes <= (1 << 20) ? 100 : (bytes <= (16 << 20) ? 40 : 16);
    std::vector<double> shm_t, mpi_t, scr_t;
    float* scr = static_cast<float*>(group->ScratchBuffer(bytes));
    // Warm up both (page faults, MPI's temporaries).
    for (int i = 0; i < 3; ++i) {
      group->Allreduce(a.data(), count, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
      group->Allreduce(scr, count, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
      MPI_Allreduce(MPI_IN_PLACE, b.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    for (int blk = 0; blk < blocks; ++blk) {
      MPI_Barrier(MPI_COMM_WORLD);
      for (int i = 0; i < per_block; ++i) {
        const int64_t t0 = NowNs();
        Status s = group->Allreduce(a.data(), count, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
        shm_t.push_back((NowNs() - t0) / 1e3);
        CheckOk(s);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      for (int i = 0; i < per_block; ++i) {
        const int64_t t0 = NowNs();
        Status s = group->Allreduce(scr, count, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
        scr_t.push_back((NowNs() - t0) / 1e3);
        CheckOk(s);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      for (int i = 0; i < per_block; ++i) {
        const int64_t t0 = NowNs();
        MPI_Allreduce(MPI_IN_PLACE, b.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        mpi_t.push_back((NowNs() - t0) / 1e3);
      }
    }
    // Rank 0's medians (both ranks take part in every call).
    const double s = Median(shm_t), m = Median(mpi_t), c = Median(scr_t);
    if (rank == 0) {
      std::printf("%10zu %12.2f %12.2f %8.2f %14.2f %10.2f\n", bytes, s, m, m / s, c, m / c);
    }
  }
  group.reset();
  MPI_Finalize();
  return 0;
}
