// Checks that a peer leaving the job never leaves the other ranks hanging. Rank 1 leaves right
// after init, in one of two ways:
//   exit  - returns from main without calling shutdown (the core's exit hook shuts down);
//   crash - _exit(0) without any cleanup (Gloo only: mpirun would kill the whole job).
// Every other rank then submits an allreduce, which must fail with TUTTI_ERR_ABORTED (at
// enqueue or through its callback) within a bounded time, with a message saying why.
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "tutti/c_api.h"

namespace {

struct Completion {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  tutti_status status = TUTTI_OK;
  std::string message;
};

void OnDone(void* user_data, tutti_status status, const char* message) {
  Completion* c = static_cast<Completion*>(user_data);
  std::lock_guard<std::mutex> lock(c->mutex);
  c->done = true;
  c->status = status;
  c->message = message ? message : "";
  c->cv.notify_all();
}

int Fail(int rank, const std::string& what) {
  std::printf("rank %d: FAIL %s\n", rank, what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "exit";
  if (tutti_init() != TUTTI_OK) {
    std::printf("init failed: %s\n", tutti_last_error());
    return 1;
  }
  const int rank = tutti_rank();
  if (rank == 1) {
    if (mode == "crash") _exit(0);
    return 0;  // no shutdown(): the exit hook must stop the core and tell the peers
  }
  // Give rank 1 time to leave.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));

  float value = 1;
  int64_t shape[1] = {1};
  tutti_tensor t = {&value, TUTTI_FLOAT32, 1, shape};
  Completion c;
  const auto start = std::chrono::steady_clock::now();
  tutti_status s = tutti_allreduce_async("after.peer.left", &t, &t, TUTTI_REDUCE_SUM, 1, 1,
                                         OnDone, &c);
  std::string message = s == TUTTI_OK ? "" : tutti_last_error();
  if (s == TUTTI_OK) {
    std::unique_lock<std::mutex> lock(c.mutex);
    if (!c.cv.wait_for(lock, std::chrono::seconds(90), [&] { return c.done; })) {
      return Fail(rank, "the request never completed after rank 1 left");
    }
    s = c.status;
    message = c.message;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rank %d: status %d after %.2f s: %s\n", rank, s, seconds, message.c_str());
  if (s != TUTTI_ERR_ABORTED) return Fail(rank, "expected TUTTI_ERR_ABORTED");
  const char* expected = mode == "crash" ? "peer" : "rank 1";
  if (message.find(expected) == std::string::npos) {
    return Fail(rank, std::string("message should mention '") + expected + "'");
  }
  if (tutti_shutdown() != TUTTI_OK) return Fail(rank, "shutdown");
  std::printf("rank %d: peer exit handled\n", rank);
  return 0;
}
