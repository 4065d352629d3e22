// Multi-process check of tutti_run, through the C ABI only: blocking requests whose cycles
// run on the calling thread. Run one copy per rank (alone, under mpirun or a Gloo store).
//   1. back-to-back tutti_run allreduces give exact sums, and the caller ran cycles itself;
//   2. one thread in tutti_run while another submits asynchronous requests: cycles take
//      turns, every result is exact (callbacks of either thread's requests may run on the
//      first);
//   3. an allgather through tutti_run (its allocate callback runs on the caller's thread);
//   4. a timeout: rank 0 drives for at most 20 ms while the others submit 300 ms later; the
//      request is left to the core's thread (finished == 0) and completes exactly;
//   5. errors: a duplicate name is refused at the call (done is not called); ranks that
//      disagree on a shape get the mismatch error through done;
//   6. shutdown: the last rank shuts down while the others are inside tutti_run for a
//      request it never makes; they get ABORTED naming it instead of hanging.
// Exits 0 when every check passed.
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "worker_util.h"

using namespace worker;

namespace {

int rank_ = 0;
int size_ = 1;

int64_t Counter(const std::string& name) {
  const int count = tutti_counter_count();
  std::vector<int64_t> values(count);
  if (tutti_counters(values.data(), count) < 0) return -1;
  for (int i = 0; i < count; ++i) {
    if (name == tutti_counter_name(i)) return values[i];
  }
  return -1;
}

// Sums of rank + 1 over the job.
float RankSum() { return static_cast<float>(size_ * (size_ + 1) / 2); }

// A float32 sum of `value` through tutti_run; returns the status done reported.
tutti_status RunSum(const std::string& name, float* value, double timeout, int32_t* finished,
                    std::string* message = nullptr) {
  Call call;
  int64_t shape[1] = {1};
  tutti_tensor t = {value, TUTTI_FLOAT32, 1, shape};
  tutti_request r = Request(name.c_str(), TUTTI_OP_ALLREDUCE, &call);
  r.num_tensors = 1;
  r.inputs = &t;
  r.outputs = &t;
  tutti_status s = tutti_run(&r, timeout, finished);
  if (s != TUTTI_OK) {
    if (message != nullptr) *message = tutti_last_error();
    return s;
  }
  if (*finished == 1) CHECK(call.done, "%s: finished == 1 before done was called", name.c_str());
  CHECK(Wait(&call), "%s: not done within 60 s", name.c_str());
  if (message != nullptr) *message = call.message;
  return call.status;
}

void CheckBackToBack() {
  const int64_t before = Counter("caller_cycles");
  int32_t finished = 0;
  for (int i = 0; i < 200; ++i) {
    float value = static_cast<float>(rank_ + 1);
    tutti_status s = RunSum("b2b." + std::to_string(i), &value, -1, &finished);
    CHECK(s == TUTTI_OK && value == RankSum(), "b2b %d: status %d, got %g want %g", i, s,
          value, RankSum());
  }
  // Each call finds the core's thread asleep nearly every time; over 200 calls at least one
  // cycle must have run on this thread.
  CHECK(Counter("caller_cycles") > before, "no cycle ran on the calling thread (%lld -> %lld)",
        static_cast<long long>(before), static_cast<long long>(Counter("caller_cycles")));
}

void CheckTwoThreads() {
  std::atomic<int> async_failures{0};
  std::thread async_thread([&] {
    for (int i = 0; i < 100; ++i) {
      Call call;
      float value = static_cast<float>(rank_ + 1);
      int64_t shape[1] = {1};
      tutti_tensor t = {&value, TUTTI_FLOAT32, 1, shape};
      const std::string name = "async." + std::to_string(i);
      tutti_request r = Request(name.c_str(), TUTTI_OP_ALLREDUCE, &call);
      r.num_tensors = 1;
      r.inputs = &t;
      r.outputs = &t;
      if (tutti_enqueue(&r) != TUTTI_OK || !Wait(&call) || call.status != TUTTI_OK ||
          value != RankSum()) {
        ++async_failures;
      }
    }
  });
  int32_t finished = 0;
  for (int i = 0; i < 100; ++i) {
    float value = static_cast<float>(rank_ + 1);
    tutti_status s = RunSum("sync." + std::to_string(i), &value, -1, &finished);
    CHECK(s == TUTTI_OK && value == RankSum(), "sync %d beside async: status %d, got %g", i, s,
          value);
  }
  async_thread.join();
  CHECK(async_failures == 0, "%d asynchronous requests beside tutti_run failed",
        async_failures.load());
}

void CheckAllgather() {
  Call call;
  int32_t mine[2] = {rank_, rank_ * 10};
  int64_t shape[1] = {2};
  tutti_tensor t = {mine, TUTTI_INT32, 1, shape};
  tutti_request r = Request("run.allgather", TUTTI_OP_ALLGATHER, &call);
  r.num_tensors = 1;
  r.inputs = &t;
  int32_t finished = 0;
  CHECK(tutti_run(&r, -1, &finished) == TUTTI_OK, "allgather: %s", tutti_last_error());
  CHECK(Wait(&call) && call.status == TUTTI_OK, "allgather: %s", call.message.c_str());
  if (call.outputs.size() != 1 || call.outputs[0].size() != 8u * size_) {
    CHECK(false, "allgather: output of the wrong size");
    return;
  }
  const int32_t* got = reinterpret_cast<const int32_t*>(call.outputs[0].data());
  for (int r2 = 0; r2 < size_; ++r2) {
    CHECK(got[2 * r2] == r2 && got[2 * r2 + 1] == r2 * 10, "allgather: rank %d's part", r2);
  }
}

void CheckTimeout() {
  int32_t finished = -1;
  float value = static_cast<float>(rank_ + 1);
  if (rank_ != 0) usleep(300 * 1000);
  tutti_status s = RunSum("late", &value, rank_ == 0 ? 0.02 : -1, &finished);
  CHECK(s == TUTTI_OK && value == RankSum(), "late: status %d, got %g", s, value);
  if (rank_ == 0 && size_ > 1) {
    CHECK(finished == 0, "late: rank 0 should have left the request to the core's thread");
  }
}

// Rank 0 submits "twice", then again through tutti_run while the first is in flight.
void CheckDuplicate() {
  Call pending;
  float held = 1;
  int64_t shape[1] = {1};
  tutti_tensor t = {&held, TUTTI_FLOAT32, 1, shape};
  tutti_request first = Request("twice", TUTTI_OP_ALLREDUCE, &pending);
  first.num_tensors = 1;
  first.inputs = first.outputs = &t;
  if (rank_ != 0) {
    usleep(500 * 1000);  // rank 0's first request stays in flight meanwhile
    CHECK(tutti_enqueue(&first) == TUTTI_OK, "twice: %s", tutti_last_error());
    CHECK(Wait(&pending) && pending.status == TUTTI_OK, "twice: the request failed");
    return;
  }
  CHECK(tutti_enqueue(&first) == TUTTI_OK, "twice: %s", tutti_last_error());
  Call second;
  float other = 1;
  tutti_tensor t2 = {&other, TUTTI_FLOAT32, 1, shape};
  tutti_request again = Request("twice", TUTTI_OP_ALLREDUCE, &second);
  again.num_tensors = 1;
  again.inputs = again.outputs = &t2;
  int32_t finished = -1;
  const tutti_status s = tutti_run(&again, -1, &finished);
  CHECK(s == TUTTI_ERR_INVALID_ARGUMENT &&
            std::string(tutti_last_error()).find("already in flight") != std::string::npos,
        "duplicate through tutti_run: status %d, '%s'", s, tutti_last_error());
  CHECK(finished == -1, "finished written for a refused request");
  CHECK(Wait(&pending) && pending.status == TUTTI_OK, "twice: the first request failed");
  usleep(50 * 1000);
  CHECK(!second.done, "done called for a request tutti_run refused");
}

void CheckErrors() {
  // A duplicate of a request in flight: refused at the call, done never called. The other
  // ranks submit late, so rank 0's first request is certainly still in flight; a rank alone
  // may see its request complete before the next call, so the check needs two ranks.
  if (size_ > 1) CheckDuplicate();

  // Shapes that differ across ranks (size > 1): the coordinator's error reaches done.
  if (size_ > 1) {
    std::vector<float> data(rank_ + 1, 1.0f);
    int64_t mismatched[1] = {rank_ + 1};
    tutti_tensor m = {data.data(), TUTTI_FLOAT32, 1, mismatched};
    Call call;
    tutti_request r = Request("mismatch", TUTTI_OP_ALLREDUCE, &call);
    r.num_tensors = 1;
    r.inputs = r.outputs = &m;
    int32_t finished = -1;
    CHECK(tutti_run(&r, -1, &finished) == TUTTI_OK, "mismatch: %s", tutti_last_error());
    CHECK(Wait(&call), "mismatch: not done");
    CHECK(call.status == TUTTI_ERR_PRECONDITION && call.message.find("shape") != std::string::npos,
          "mismatch: status %d, '%s'", call.status, call.message.c_str());
  }
}

void CheckShutdownDuringRun() {
  if (size_ == 1) return;
  if (rank_ == size_ - 1) {
    usleep(200 * 1000);  // the others are inside tutti_run by now
    CHECK(tutti_shutdown() == TUTTI_OK, "shutdown: %s", tutti_last_error());
    return;
  }
  float value = 1;
  int32_t finished = 0;
  std::string message;
  tutti_status s = RunSum("never.answered", &value, -1, &finished, &message);
  CHECK(s == TUTTI_ERR_ABORTED &&
            message.find("shut down by rank " + std::to_string(size_ - 1)) != std::string::npos,
        "request pending at a peer's shutdown: status %d, '%s'", s, message.c_str());
  CHECK(tutti_shutdown() == TUTTI_OK, "shutdown after the peer's");
}

}  // namespace

int main(int argc, char** argv) {
  const int expected_size = argc > 1 ? std::atoi(argv[1]) : 0;
  CHECK(tutti_c_api_minor_version() >= 2, "core minor version %d", tutti_c_api_minor_version());
  CHECK(tutti_init() == TUTTI_OK, "init: %s", tutti_last_error());
  rank_ = my_rank = tutti_rank();
  size_ = tutti_size();
  if (expected_size > 0) CHECK(size_ == expected_size, "size %d", size_);
  CheckBackToBack();
  CheckTwoThreads();
  CheckAllgather();
  CheckTimeout();
  CheckErrors();
  CheckShutdownDuringRun();
  if (size_ == 1) CHECK(tutti_shutdown() == TUTTI_OK, "shutdown");
  // After shutdown the call is refused like tutti_enqueue.
  float value = 1;
  int32_t finished = 0;
  std::string message;
  CHECK(RunSum("after", &value, -1, &finished, &message) == TUTTI_ERR_NOT_INITIALIZED,
        "tutti_run after shutdown: '%s'", message.c_str());
  return Finish();
}
