// The shared-memory transport alone: tutti::shm::Group::Allreduce (by default, pipeline only,
// single copy only, and on scratch memory) vs MPI_Allreduce (float32 sum, in place), measured
// in the same mpirun launch, alternating blocks. Prints medians and ratios.
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
#include <cstring>
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

// A gradient step's worth of small tensors (100 x 40 KiB), three ways in one launch: packed
// into the segment's scratch memory, reduced there and unpacked (what fusion did before
// AllreduceSpans); AllreduceSpans straight from and to the tensors; and MPI_Allreduce of one
// 4 MB buffer (the reference). Medians and minima (the minimum is the least disturbed by other
// work on a busy machine).
static void FusedStep(int rank, Group* group) {
  const int tensors = 100;
  const int64_t each = 40960 / 4, total = each * tensors;
  std::vector<std::vector<float>> grads(tensors, std::vector<float>(each, 0.0f));
  std::vector<float> one(total, 0.0f);
  std::vector<Group::Span> spans;
  for (auto& g : grads) spans.push_back({g.data(), g.data(), each});
  char* scratch = static_cast<char*>(group->ScratchBuffer(total * 4));
  auto packed = [&] {
    for (int i = 0; i < tensors; ++i) std::memcpy(scratch + i * each * 4, grads[i].data(), each * 4);
    Status s = group->Allreduce(scratch, total, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
    for (int i = 0; i < tensors; ++i) std::memcpy(grads[i].data(), scratch + i * each * 4, each * 4);
    return s;
  };
  std::vector<double> pack_t, span_t, mpi_t;
  for (int blk = 0; blk < 60; ++blk) {
    MPI_Barrier(MPI_COMM_WORLD);
    int64_t t0 = NowNs();
    CheckOk(packed());
    pack_t.push_back((NowNs() - t0) / 1e3);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = NowNs();
    CheckOk(group->AllreduceSpans(spans, TUTTI_FLOAT32, TUTTI_REDUCE_SUM, 1.0, 1));
    span_t.push_back((NowNs() - t0) / 1e3);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = NowNs();
    MPI_Allreduce(MPI_IN_PLACE, one.data(), static_cast<int>(total), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    mpi_t.push_back((NowNs() - t0) / 1e3);
  }
  if (rank == 0) {
    const double p = Median(pack_t), s = Median(span_t), m = Median(mpi_t);
    const double pm = *std::min_element(pack_t.begin(), pack_t.end());
    const double sm = *std::min_element(span_t.begin(), span_t.end());
    const double mm = *std::min_element(mpi_t.begin(), mpi_t.end());
    std::printf("\n100 x 40 KiB (median / min us): packed into scratch %.0f / %.0f, spans %.0f / "
                "%.0f, MPI 1 x 4000 KiB %.0f / %.0f; MPI/packed %.2f, MPI/spans %.2f (medians)\n",
                p, pm, s, sm, m, mm, m / p, m / s);
  }
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
  auto barrier = [] {
    return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? Status::OK()
                                                      : Status::Internal("barrier");
  };
  // Three groups over the same ranks: the default (the measured choice between the pipeline
  // and the single copy), the pipeline only, the single copy whenever possible.
  const Group::Options::SingleCopy modes[] = {Group::Options::SingleCopy::kAuto,
                                              Group::Options::SingleCopy::kNever,
                                              Group::Options::SingleCopy::kAlways};
  std::unique_ptr<Group> groups[3];
  for (int g = 0; g < 3; ++g) {
    Group::Options o = options;
    o.single_copy = modes[g];
    Status st = Group::Create("/tutti-bench-" + std::to_string(getppid()) + "-" + std::to_string(g),
                              rank, size, o, barrier, &groups[g]);
    if (!st.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, st.message().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  Group* group = groups[0].get();
  std::vector<size_t> sizes = {4, 1024, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
  if (rank == 0) {
    std::printf("%d ranks, float32 sum in place; median per call over interleaved blocks; single "
                "copy %s\n", size, group->single_copy_available() ? "available" : "unavailable");
    std::printf("%10s %10s %10s %10s %10s %8s %10s %8s\n", "bytes", "default us", "pipeline",
                "single", "MPI us", "MPI/def", "scratch", "MPI/scr");
  }
  for (size_t bytes : sizes) {
    const int64_t count = static_cast<int64_t>(bytes / 4);
    std::vector<float> a(count, 0.0f), b(count, 0.0f);
    // Short alternating blocks: every contender sees the same background load.
    const int per_block = bytes <= 65536 ? 50 : (bytes <= (1 << 20) ? 5 : 1);
    const int blocks = bytes <= (1 << 20) ? 100 : (bytes <= (16 << 20) ? 40 : 16);
    float* scr = static_cast<float*>(groups[1]->ScratchBuffer(bytes));
    // 0-2: the groups on a private buffer, 3: the pipeline group on its scratch memory, 4: MPI.
    auto call = [&](int which) {
      if (which < 3) return groups[which]->Allreduce(a.data(), count, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
      if (which == 3) return groups[1]->Allreduce(scr, count, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
      MPI_Allreduce(MPI_IN_PLACE, b.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      return Status::OK();
    };
    std::vector<double> times[5];
    for (int i = 0; i < 3; ++i) {  // warm up (page faults, MPI's temporaries)
      for (int w = 0; w < 5; ++w) CheckOk(call(w));
    }
    for (int blk = 0; blk < blocks; ++blk) {
      // The contender that runs first in a block finds the caches full of the last one's
      // buffers; rotate the order so that none is always first.
      for (int turn = 0; turn < 5; ++turn) {
        const int w = (turn + blk) % 5;
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < per_block; ++i) {
          const int64_t t0 = NowNs();
          Status s = call(w);
          times[w].push_back((NowNs() - t0) / 1e3);
          CheckOk(s);
        }
      }
    }
    // Rank 0's medians (every rank takes part in every call).
    double med[5];
    for (int w = 0; w < 5; ++w) med[w] = Median(times[w]);
    if (rank == 0) {
      std::printf("%10zu %10.2f %10.2f %10.2f %10.2f %8.2f %10.2f %8.2f\n", bytes, med[0], med[1],
                  med[2], med[4], med[4] / med[0], med[3], med[4] / med[3]);
    }
  }
  FusedStep(rank, group);
  for (auto& g : groups) g.reset();
  MPI_Finalize();
  return 0;
}
