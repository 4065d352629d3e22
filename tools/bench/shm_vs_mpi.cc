// The shared-memory transport alone: tutti::shm::Group::Allreduce (by default, pipeline only
// with ordinary and with streaming stores, single copy only, and on scratch memory) vs
// MPI_Allreduce (float32 sum, in place), measured in the same mpirun launch, alternating
// blocks. Prints medians and ratios.
// Build: bazel build //tools/bench:shm_vs_mpi
// Run:   mpirun --allow-run-as-root -np 2 bazel-bin/tools/bench/shm_vs_mpi
// SMALL_BYTES, CHUNK_BYTES and RING_SLOTS in the environment override the Group's options;
// FUSED_ONLY=1 skips the sweep and measures only the 100-tensor step.
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

// A permutation of 0..n-1 that depends only on `round` (the same on every rank), so that no
// contender always follows the same one.
static void Shuffle(int round, int* order, int n) {
  for (int i = 0; i < n; ++i) order[i] = i;
  uint32_t seed = 2654435761u * static_cast<uint32_t>(round + 1);
  for (int i = n - 1; i > 0; --i) {
    seed = seed * 1664525u + 1013904223u;
    std::swap(order[i], order[(seed >> 8) % static_cast<uint32_t>(i + 1)]);
  }
}

// The algorithms a contender forces (every rank switches between the same calls).
enum Mode { kDefault, kPipeline, kStreaming, kSingle };
static void SetMode(Group* group, Mode mode) {
  using SingleCopy = Group::Options::SingleCopy;
  using SlotStores = Group::Options::SlotStores;
  group->set_single_copy(mode == kDefault ? SingleCopy::kAuto
                         : mode == kSingle ? SingleCopy::kAlways
                                           : SingleCopy::kNever);
  group->set_slot_stores(mode == kPipeline    ? SlotStores::kCached
                         : mode == kStreaming ? SlotStores::kStreaming
                                              : SlotStores::kAuto);
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
  // Contenders, interleaved: packed into scratch; the spans with the measured choice, the
  // pipeline only (ordinary stores, then streaming stores) and the single copy only; one
  // 4000 KiB buffer (the tensors' bytes in one allocation) with the single copy;
  // MPI_Allreduce of that buffer.
  const char* names[] = {"packed into scratch", "spans (default)", "spans, pipeline",
                         "spans, streaming", "spans, single copy", "1 buffer, single copy",
                         "MPI 1 x 4000 KiB"};
  constexpr int kContenders = 7;
  std::vector<double> times[kContenders];
  auto call = [&](int which) {
    if (which == 0) return packed();
    SetMode(group, which == 1 ? kDefault : which == 2 ? kPipeline : which == 3 ? kStreaming
                                                                              : kSingle);
    if (which < 5) return group->AllreduceSpans(spans, TUTTI_FLOAT32, TUTTI_REDUCE_SUM, 1.0, 1);
    if (which == 5) return group->Allreduce(one.data(), total, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
    MPI_Allreduce(MPI_IN_PLACE, one.data(), static_cast<int>(total), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    return Status::OK();
  };
  for (int w = 0; w < kContenders; ++w) CheckOk(call(w));  // page faults, MPI's temporaries
  for (int blk = 0; blk < 60; ++blk) {
    // Each contender finds the caches as the one before it left them (a call after the
    // packed one starts with cold tensors, one after a call on the same spans with warm
    // ones): the order is shuffled per call round, the same on every rank.
    int order[kContenders];
    Shuffle(blk, order, kContenders);
    for (int turn = 0; turn < kContenders; ++turn) {
      const int w = order[turn];
      MPI_Barrier(MPI_COMM_WORLD);
      const int64_t t0 = NowNs();
      CheckOk(call(w));
      times[w].push_back((NowNs() - t0) / 1e3);
    }
  }
  SetMode(group, kDefault);
  if (rank == 0) {
    const double mpi = Median(times[kContenders - 1]);
    std::printf("\n100 x 40 KiB, median / min us over 60 interleaved calls (MPI/x: medians)\n");
    for (int w = 0; w < kContenders; ++w) {
      std::printf("%24s %8.0f / %6.0f  MPI/x %.2f\n", names[w], Median(times[w]),
                  *std::min_element(times[w].begin(), times[w].end()),
                  mpi / Median(times[w]));
    }
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
  // One group whose single-copy mode switches between the contenders (every rank switches
  // between the same calls): the default (the measured choice between the pipeline and the
  // single copy), the pipeline only, the single copy whenever possible. Separate groups would
  // compare segments too: with identical settings, the first of three groups measured 10-18%
  // slower at 16 MiB than the second in every launch, whatever its mode.
  std::unique_ptr<Group> group_owner;
  Status st = Group::Create("/tutti-bench-" + std::to_string(getppid()), rank, size, options,
                            barrier, &group_owner);
  if (!st.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, st.message().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  Group* group = group_owner.get();
  std::vector<size_t> sizes = {4, 1024, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
  if (const char* v = std::getenv("SIZES")) {  // comma-separated bytes
    sizes.clear();
    for (char* end = const_cast<char*>(v); *end != '\0';) {
      sizes.push_back(std::strtoul(end, &end, 0));
      if (*end == ',') ++end;
    }
  }
  if (std::getenv("FUSED_ONLY") != nullptr) sizes.clear();  // only the 100-tensor step
  if (rank == 0) {
    std::printf("%d ranks, float32 sum in place; median per call over interleaved blocks; single "
                "copy %s\n", size, group->single_copy_available() ? "available" : "unavailable");
    std::printf("%10s %10s %10s %10s %10s %10s %8s %10s %8s\n", "bytes", "default us",
                "pipeline", "streaming", "single", "MPI us", "MPI/def", "scratch", "MPI/scr");
  }
  for (size_t bytes : sizes) {
    const int64_t count = static_cast<int64_t>(bytes / 4);
    std::vector<float> a(count, 0.0f), b(count, 0.0f);
    // Short alternating blocks: every contender sees the same background load.
    const int per_block = bytes <= 65536 ? 50 : (bytes <= (1 << 20) ? 5 : 1);
    const int blocks = bytes <= (1 << 20) ? 100 : (bytes <= (16 << 20) ? 40 : 16);
    float* scr = static_cast<float*>(group->ScratchBuffer(bytes));
    // 0-3: the four modes on a private buffer, 4: its scratch memory, 5: MPI.
    constexpr int kContenders = 6;
    const Mode modes[] = {kDefault, kPipeline, kStreaming, kSingle, kPipeline};
    auto call = [&](int which) {
      if (which < 5) SetMode(group, modes[which]);
      if (which < 4) return group->Allreduce(a.data(), count, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
      if (which == 4) return group->Allreduce(scr, count, TUTTI_FLOAT32, TUTTI_REDUCE_SUM);
      MPI_Allreduce(MPI_IN_PLACE, b.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      return Status::OK();
    };
    std::vector<double> times[kContenders];
    for (int i = 0; i < 3; ++i) {  // warm up (page faults, MPI's temporaries)
      for (int w = 0; w < kContenders; ++w) CheckOk(call(w));
    }
    for (int blk = 0; blk < blocks; ++blk) {
      // A contender finds the caches as the one before it left them (MPI's buffers, the
      // segment's slots): shuffle the order per block, the same on every rank, so that no
      // contender always follows the same one.
      int order[kContenders];
      Shuffle(blk, order, kContenders);
      for (int turn = 0; turn < kContenders; ++turn) {
        const int w = order[turn];
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
    double med[kContenders];
    for (int w = 0; w < kContenders; ++w) med[w] = Median(times[w]);
    if (rank == 0) {
      std::printf("%10zu %10.2f %10.2f %10.2f %10.2f %10.2f %8.2f %10.2f %8.2f\n", bytes, med[0],
                  med[1], med[2], med[3], med[5], med[5] / med[0], med[4], med[5] / med[4]);
    }
  }
  SetMode(group, kDefault);
  FusedStep(rank, group);
  group_owner.reset();
  MPI_Finalize();
  return 0;
}
