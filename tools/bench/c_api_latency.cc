// Per-request cost through the C ABI, without Python: a 4-byte float32 sum allreduce, back
// to back and isolated (after a barrier and 10 ms idle), against MPI_Allreduce in the same
// launch, submitted two ways in alternating blocks: `enqueue` (tutti_enqueue, then
// tutti_completion_wait: the core's thread runs the cycle) and `run` (tutti_run: the caller
// runs it when the core's thread is idle).
// Prints medians and minima (the minimum is the least disturbed by other work on a busy
// machine) of wall time, and the process's CPU time per back-to-back call (both of its
// threads: the caller and the core's).
// Build: bazel build //tools/bench:c_api_latency
// Run:   mpirun --allow-run-as-root -np 2 bazel-bin/tools/bench/c_api_latency
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "tutti/c_api.h"

namespace {

double Now(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;  // microseconds
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Min(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "%s failed: %s\n", what, tutti_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

// One allreduce of `value` through the core, waited for; `run`: through tutti_run.
void TuttiAllreduce(float* value, bool run) {
  static const int64_t shape[1] = {1};
  tutti_tensor view{value, TUTTI_FLOAT32, 1, shape};
  tutti_completion done{};
  tutti_request request{};
  request.name = "latency";
  request.collective = TUTTI_OP_ALLREDUCE;
  request.process_set = TUTTI_GLOBAL_PROCESS_SET;
  request.num_tensors = 1;
  request.inputs = &view;
  request.outputs = &view;
  request.reduce_op = TUTTI_REDUCE_SUM;
  request.prescale = 1.0;
  request.postscale = 1.0;
  request.done = tutti_completion_done;
  request.user_data = &done;
  int32_t finished = 0;
  if (run) {
    Check(tutti_run(&request, -1, &finished) == TUTTI_OK, "tutti_run");
  } else {
    Check(tutti_enqueue(&request) == TUTTI_OK, "tutti_enqueue");
  }
  if (!finished) tutti_completion_wait(&done, -1);
  Check(done.status == TUTTI_OK, done.message);
}

struct Figures {
  std::vector<double> wall, cpu, iso;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Check(tutti_init() == TUTTI_OK, "tutti_init");
  float x = 0.0f, y = 0.0f;
  for (int i = 0; i < 200; ++i) TuttiAllreduce(&x, i % 2 == 0);  // warm: the cache holds it
  const int calls = 2000;
  Figures enqueue, run;
  std::vector<double> mpi;
  for (int block = 0; block < 14; ++block) {
    const bool use_run = block % 2 == 1;
    Figures& f = use_run ? run : enqueue;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = Now(CLOCK_MONOTONIC), c0 = Now(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < calls; ++i) TuttiAllreduce(&x, use_run);
    f.wall.push_back((Now(CLOCK_MONOTONIC) - t0) / calls);
    f.cpu.push_back((Now(CLOCK_PROCESS_CPUTIME_ID) - c0) / calls);
    if (use_run) continue;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = Now(CLOCK_MONOTONIC);
    for (int i = 0; i < calls; ++i) {
      MPI_Allreduce(MPI_IN_PLACE, &y, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    mpi.push_back((Now(CLOCK_MONOTONIC) - t0) / calls);
  }
  std::vector<double> iso_mpi;
  for (int i = 0; i < 90; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    double t0 = Now(CLOCK_MONOTONIC);
    if (i % 3 == 2) {
      MPI_Allreduce(MPI_IN_PLACE, &y, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      iso_mpi.push_back(Now(CLOCK_MONOTONIC) - t0);
    } else {
      TuttiAllreduce(&x, i % 3 == 1);
      (i % 3 == 1 ? run : enqueue).iso.push_back(Now(CLOCK_MONOTONIC) - t0);
    }
  }
  char line[512];
  for (const auto& [label, f] : {std::make_pair("enqueue", &enqueue), std::make_pair("run", &run)}) {
    std::snprintf(line, sizeof(line),
                  "rank %d %-7s: back to back %.1f / %.1f us (median / min), CPU %.1f / %.1f us "
                  "per call; isolated %.0f / %.0f us\n",
                  rank, label, Median(f->wall), Min(f->wall), Median(f->cpu), Min(f->cpu),
                  Median(f->iso), Min(f->iso));
    std::fputs(line, stdout);
  }
  std::snprintf(line, sizeof(line),
                "rank %d MPI    : back to back %.1f / %.1f us; isolated %.0f / %.0f us\n", rank,
                Median(mpi), Min(mpi), Median(iso_mpi), Min(iso_mpi));
  std::fputs(line, stdout);
  tutti_shutdown();
  MPI_Finalize();
  return 0;
}
