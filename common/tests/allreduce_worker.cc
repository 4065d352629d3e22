// Multi-process check of the core through its C ABI only. Run one copy per rank (under
// mpirun, under a Gloo store, or alone): it initializes tutti, allreduces every dtype with
// every op (in place and out of place, with scale factors, submitted in a different order on
// each rank) and checks the results, then checks the error paths (rank mismatch, duplicate
// names, shutdown with pending requests, use before init and after shutdown) and init ->
// shutdown -> init. Exits 0 when every check passed.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "worker_util.h"

using namespace worker;

namespace {

using Completion = Call;
constexpr tutti_done_fn OnDone = OnCallDone;

const char* OpName(tutti_reduce_op op) {
  static const char* names[] = {"average", "sum", "min", "max", "product"};
  return names[op];
}

// Contribution of `rank` to element i: small positive integers, so every sum and product
// below is exact in every dtype.
double Value(tutti_dtype d, int rank, size_t i) {
  if (d == TUTTI_BOOL) return (rank + i) % 2 == 0 || i % 3 == 0 ? 1 : 0;
  return static_cast<double>((rank * 7 + i * 3) % 5 + 1);
}

double Expected(tutti_dtype d, tutti_reduce_op op, int size, size_t i, double prescale,
                double postscale) {
  double acc = 0;
  for (int r = 0; r < size; ++r) {
    double v = Value(d, r, i) * prescale;
    if (IsInteger(d)) v = std::trunc(v);  // prescale is applied per rank, truncating
    if (r == 0) {
      acc = v;
    } else if (d == TUTTI_BOOL) {
      acc = (op == TUTTI_REDUCE_SUM || op == TUTTI_REDUCE_MAX) ? (acc || v) : (acc && v);
    } else if (op == TUTTI_REDUCE_SUM || op == TUTTI_REDUCE_AVERAGE) {
      acc += v;
    } else if (op == TUTTI_REDUCE_MIN) {
      acc = std::min(acc, v);
    } else if (op == TUTTI_REDUCE_MAX) {
      acc = std::max(acc, v);
    } else {
      acc *= v;
    }
  }
  double scale = postscale / (op == TUTTI_REDUCE_AVERAGE ? size : 1);
  // Integers are scaled in double and truncated toward zero, float64 in double, and the
  // narrower floats multiply by the scale rounded to float, in float (Horovod 0.28.1).
  if (IsInteger(d)) return std::trunc(acc * scale);
  if (d == TUTTI_FLOAT64 || scale == 1.0) return acc * scale;
  return static_cast<double>(static_cast<float>(acc) * static_cast<float>(scale));
}

struct Case {
  std::string name;
  tutti_dtype dtype;
  tutti_reduce_op op;
  bool in_place;
  double prescale, postscale;
  std::vector<int64_t> shape;
  std::vector<char> input, output, expected;
  Completion completion;
};

std::vector<std::unique_ptr<Case>> MakeCases(int rank, int size) {
  std::vector<std::unique_ptr<Case>> cases;
  for (int d = TUTTI_UINT8; d <= TUTTI_BOOL; ++d) {
    for (int o = TUTTI_REDUCE_AVERAGE; o <= TUTTI_REDUCE_PRODUCT; ++o) {
      tutti_dtype dtype = static_cast<tutti_dtype>(d);
      tutti_reduce_op op = static_cast<tutti_reduce_op>(o);
      if (dtype == TUTTI_BOOL && op == TUTTI_REDUCE_AVERAGE) continue;  // rejected; see below
      for (int variant = 0; variant < 3; ++variant) {
        // variant 0: in place; 1: out of place; 2: out of place with scale factors.
        if (variant == 2 && (dtype == TUTTI_BOOL || op == TUTTI_REDUCE_PRODUCT)) continue;
        std::unique_ptr<Case> c(new Case());
        c->dtype = dtype;
        c->op = op;
        c->in_place = variant == 0;
        c->prescale = variant == 2 ? 2.0 : 1.0;
        c->postscale = variant == 2 ? 0.5 : 1.0;
        c->shape = variant == 1 ? std::vector<int64_t>{3, 5} : std::vector<int64_t>{17};
        c->name = std::string("ar.") + DtypeName(dtype) + "." + OpName(op) + ".v" +
                  std::to_string(variant);
        size_t n = 1;
        for (int64_t s : c->shape) n *= s;
        size_t es = ElementSize(dtype);
        c->input.resize(n * es);
        c->output.assign(n * es, 0);
        c->expected.resize(n * es);
        for (size_t i = 0; i < n; ++i) {
          Store(dtype, c->input.data(), i, Value(dtype, rank, i));
          Store(dtype, c->expected.data(), i,
                Expected(dtype, op, size, i, c->prescale, c->postscale));
        }
        cases.push_back(std::move(c));
      }
    }
  }
  return cases;
}

void CheckAllDtypesAndOps(int rank, int size) {
  std::vector<std::unique_ptr<Case>> cases = MakeCases(rank, size);
  // Each rank submits in a different order (rotated by rank, reversed on odd ranks).
  std::vector<Case*> order;
  for (size_t k = 0; k < cases.size(); ++k) {
    order.push_back(cases[(k + rank * 7) % cases.size()].get());
  }
  if (rank % 2 == 1) std::reverse(order.begin(), order.end());
  for (Case* c : order) {
    tutti_tensor in = {c->input.data(), c->dtype, static_cast<int32_t>(c->shape.size()),
                       c->shape.data()};
    tutti_tensor out = in;
    if (!c->in_place) out.data = c->output.data();
    tutti_status s = tutti_allreduce_async(c->name.c_str(), &in, &out, c->op, c->prescale,
                                           c->postscale, OnDone, &c->completion);
    CHECK(s == TUTTI_OK, "enqueue %s: %d %s", c->name.c_str(), s, tutti_last_error());
    if (s != TUTTI_OK) c->completion.done = true;
  }
  for (auto& c : cases) {
    CHECK(Wait(&c->completion), "%s did not complete", c->name.c_str());
    CHECK(c->completion.status == TUTTI_OK, "%s: status %d: %s", c->name.c_str(),
          c->completion.status, c->completion.message.c_str());
    const std::vector<char>& got = c->in_place ? c->input : c->output;
    bool equal = got == c->expected;
    CHECK(equal, "%s: wrong result", c->name.c_str());
    if (!equal) {
      size_t es = ElementSize(c->dtype);
      for (size_t i = 0; i * es < got.size(); ++i) {
        if (std::memcmp(&got[i * es], &c->expected[i * es], es) != 0) {
          uint64_t g = 0, e = 0;
          std::memcpy(&g, &got[i * es], es);
          std::memcpy(&e, &c->expected[i * es], es);
          std::fprintf(stderr, "  element %zu: got bits 0x%llx, expected 0x%llx\n", i,
                       (unsigned long long)g, (unsigned long long)e);
          break;
        }
      }
    }
    if (!c->in_place) {
      // Out of place must leave the input alone.
      std::vector<char> original(c->input.size());
      size_t n = original.size() / ElementSize(c->dtype);
      for (size_t i = 0; i < n; ++i) Store(c->dtype, original.data(), i, Value(c->dtype, rank, i));
      CHECK(original == c->input, "%s: input modified by out-of-place allreduce", c->name.c_str());
    }
  }
}

// Allreduce of one float, used as a barrier and as a simple end-to-end check.
bool Allreduce1(const char* name, float* value, tutti_reduce_op op = TUTTI_REDUCE_SUM) {
  Completion c;
  int64_t shape[1] = {1};
  tutti_tensor t = {value, TUTTI_FLOAT32, 1, shape};
  if (tutti_allreduce_async(name, &t, &t, op, 1.0, 1.0, OnDone, &c) != TUTTI_OK) {
    std::fprintf(stderr, "rank %d: enqueue %s failed: %s\n", my_rank, name, tutti_last_error());
    return false;
  }
  return Wait(&c) && c.status == TUTTI_OK;
}

// Megabyte tensors (past the shared-memory transport's small protocols, where it may read the
// peers' buffers directly): one alone in place, and three submitted together out of place
// (fused), averaged; every element checked.
void CheckLarge(int rank, int size) {
  const int64_t counts[4] = {300001, 200000, 150007, 250000};
  auto value = [](int r, int64_t i) { return static_cast<float>(r * 1000 + i % 977); };
  std::vector<std::vector<float>> in(4), out(4);
  Completion done[4];
  tutti_tensor tin[4], tout[4];
  for (int k = 0; k < 4; ++k) {
    in[k].resize(static_cast<size_t>(counts[k]));
    out[k].assign(static_cast<size_t>(counts[k]), -1.0f);
    for (int64_t i = 0; i < counts[k]; ++i) in[k][i] = value(rank, i);
    tin[k] = {in[k].data(), TUTTI_FLOAT32, 1, &counts[k]};
    tout[k] = {out[k].data(), TUTTI_FLOAT32, 1, &counts[k]};
  }
  const std::string names[4] = {"large.alone", "large.fused.0", "large.fused.1", "large.fused.2"};
  CHECK(tutti_allreduce_async(names[0].c_str(), &tin[0], &tin[0], TUTTI_REDUCE_SUM, 1, 1, OnDone,
                              &done[0]) == TUTTI_OK, "enqueue %s", names[0].c_str());
  for (int k = 1; k < 4; ++k) {
    CHECK(tutti_allreduce_async(names[k].c_str(), &tin[k], &tout[k], TUTTI_REDUCE_AVERAGE, 1, 1,
                                OnDone, &done[k]) == TUTTI_OK, "enqueue %s", names[k].c_str());
  }
  for (int k = 0; k < 4; ++k) {
    CHECK(Wait(&done[k]) && done[k].status == TUTTI_OK, "%s failed", names[k].c_str());
    const std::vector<float>& got = k == 0 ? in[k] : out[k];
    for (int64_t i = 0; i < counts[k]; ++i) {
      double sum = 0;
      for (int r = 0; r < size; ++r) sum += value(r, i);
      const double want = k == 0 ? sum : sum / size;
      if (!Close(TUTTI_FLOAT32, got[i], want)) {
        CHECK(false, "%s element %lld: %g, expected %g", names[k].c_str(), (long long)i, got[i],
              want);
        break;
      }
    }
    if (k > 0) {
      for (int64_t i = 0; i < counts[k]; ++i) {
        if (in[k][i] != value(rank, i)) {
          CHECK(false, "%s: input modified by an out-of-place allreduce", names[k].c_str());
          break;
        }
      }
    }
  }
}

void CheckErrors(int rank, int size) {
  int64_t shape[1] = {4};
  float data[8] = {0};
  tutti_tensor t = {data, TUTTI_FLOAT32, 1, shape};

  // Invalid arguments are refused at enqueue, and the callback is not called.
  Completion never;
  bool b[4] = {true, false, true, false};
  tutti_tensor bt = {b, TUTTI_BOOL, 1, shape};
  CHECK(tutti_allreduce_async("bool.avg", &bt, &bt, TUTTI_REDUCE_AVERAGE, 1, 1, OnDone, &never) ==
            TUTTI_ERR_INVALID_ARGUMENT, "bool average must be refused");
  CHECK(std::strstr(tutti_last_error(), "bool") != nullptr, "message: %s", tutti_last_error());
  tutti_tensor bad = t;
  bad.dtype = static_cast<tutti_dtype>(42);
  CHECK(tutti_allreduce_async("bad.dtype", &bad, &bad, TUTTI_REDUCE_SUM, 1, 1, OnDone, &never) ==
            TUTTI_ERR_INVALID_ARGUMENT, "invalid dtype must be refused");
  CHECK(tutti_allreduce_async("", &t, &t, TUTTI_REDUCE_SUM, 1, 1, OnDone, &never) ==
            TUTTI_ERR_INVALID_ARGUMENT, "empty name must be refused");
  CHECK(!never.done, "callback must not run for a refused request");

  // Duplicate name in flight: rank 0 submits "dup" before the barrier, the others after it,
  // so rank 0's first "dup" is certainly still pending when it submits the second.
  Completion dup;
  if (rank == 0) {
    CHECK(tutti_allreduce_async("dup", &t, &t, TUTTI_REDUCE_SUM, 1, 1, OnDone, &dup) == TUTTI_OK,
          "dup: %s", tutti_last_error());
    if (size > 1) {
      Completion dup2;
      tutti_status s = tutti_allreduce_async("dup", &t, &t, TUTTI_REDUCE_SUM, 1, 1, OnDone, &dup2);
      CHECK(s == TUTTI_ERR_INVALID_ARGUMENT, "second 'dup' in flight must fail, got %d", s);
      CHECK(std::strstr(tutti_last_error(), "dup") != nullptr, "message: %s", tutti_last_error());
    }
  }
  float one = 1;
  CHECK(Allreduce1("barrier.dup", &one), "barrier");
  if (rank != 0) {
    CHECK(tutti_allreduce_async("dup", &t, &t, TUTTI_REDUCE_SUM, 1, 1, OnDone, &dup) == TUTTI_OK,
          "dup: %s", tutti_last_error());
  }
  CHECK(Wait(&dup) && dup.status == TUTTI_OK, "dup completes: %s", dup.message.c_str());

  if (size > 1) {
    // Ranks disagree on the shape and (on rank 1) the dtype: everyone gets an error naming
    // the tensor, the ranks and what differs.
    int64_t my_shape[1] = {rank == 1 ? 5 : 4};
    tutti_tensor m = {data, rank == 1 ? TUTTI_FLOAT64 : TUTTI_FLOAT32, 1, my_shape};
    Completion mismatch;
    CHECK(tutti_allreduce_async("mismatched.tensor", &m, &m, TUTTI_REDUCE_SUM, 1, 1, OnDone,
                                &mismatch) == TUTTI_OK, "enqueue mismatch");
    CHECK(Wait(&mismatch), "mismatch completes");
    CHECK(mismatch.status == TUTTI_ERR_PRECONDITION, "mismatch status %d", mismatch.status);
    const std::string& msg = mismatch.message;
    CHECK(msg.find("mismatched.tensor") != std::string::npos &&
              msg.find("shape") != std::string::npos && msg.find("dtype") != std::string::npos &&
              msg.find("rank 1") != std::string::npos, "mismatch message: %s", msg.c_str());
  }
}

std::string ThreadName(int64_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

// One full session: init, topology, every allreduce, errors, shutdown.
void Session(int round, int expected_size) {
  tutti_status init = tutti_init();
  CHECK(init == TUTTI_OK, "init (round %d): %s", round, tutti_last_error());
  if (init != TUTTI_OK) return;
  CHECK(tutti_init() == TUTTI_OK, "second init is a no-op");
  CHECK(tutti_is_initialized() == 1, "is_initialized");
  int rank = tutti_rank(), size = tutti_size();
  my_rank = rank;
  CHECK(rank >= 0 && rank < size, "rank %d size %d", rank, size);
  if (expected_size > 0) CHECK(size == expected_size, "size %d, expected %d", size, expected_size);
  CHECK(tutti_local_rank() >= 0 && tutti_local_rank() < tutti_local_size(), "local rank");
  CHECK(tutti_cross_rank() >= 0 && tutti_cross_rank() < tutti_cross_size(), "cross rank");
  CHECK(tutti_local_size() * tutti_cross_size() == size, "local_size * cross_size == size");
  int64_t tid = tutti_background_thread_id();
  CHECK(tid > 0 && ThreadName(tid) == "tutti-core", "background thread %lld named '%s'",
        (long long)tid, ThreadName(tid).c_str());

  float value = static_cast<float>(rank + 1);
  CHECK(Allreduce1("hello", &value) && value == size * (size + 1) / 2.0f, "hello sum %f", value);

  CheckAllDtypesAndOps(rank, size);
  CheckLarge(rank, size);
  CheckErrors(rank, size);

  // A request only rank 0 submits can never run: shutdown fails it with ABORTED.
  float orphan_data = 1;
  int64_t one[1] = {1};
  tutti_tensor orphan = {&orphan_data, TUTTI_FLOAT32, 1, one};
  Completion orphaned;
  if (rank == 0 && size > 1) {
    CHECK(tutti_allreduce_async("orphan", &orphan, &orphan, TUTTI_REDUCE_SUM, 1, 1, OnDone,
                                &orphaned) == TUTTI_OK, "enqueue orphan");
  }
  float last = 1;
  CHECK(Allreduce1("before.shutdown", &last), "barrier before shutdown");
  CHECK(tutti_shutdown() == TUTTI_OK, "shutdown");
  if (rank == 0 && size > 1) {
    CHECK(Wait(&orphaned, 5) && orphaned.status == TUTTI_ERR_ABORTED,
          "pending request must fail with ABORTED at shutdown (status %d)", orphaned.status);
  }
  CHECK(tutti_is_initialized() == 0, "not initialized after shutdown");
  CHECK(tutti_rank() == -1 && std::strstr(tutti_last_error(), "shut down") != nullptr,
        "rank after shutdown: %s", tutti_last_error());
  CHECK(tutti_allreduce_async("late", &orphan, &orphan, TUTTI_REDUCE_SUM, 1, 1, OnDone,
                              &orphaned) == TUTTI_ERR_NOT_INITIALIZED,
        "allreduce after shutdown must fail with NOT_INITIALIZED");
  CHECK(std::string(tutti_controller()).empty(), "controller after shutdown");
}

}  // namespace

int main(int argc, char** argv) {
  int expected_size = argc > 1 ? std::atoi(argv[1]) : 0;
  CHECK(tutti_c_api_version() == TUTTI_C_API_VERSION, "api version");
  CHECK(tutti_is_initialized() == 0, "initialized before init");
  CHECK(tutti_rank() == -1, "rank before init");
  CHECK(std::strstr(tutti_last_error(), "not initialized") != nullptr &&
            std::strstr(tutti_last_error(), "init()") != nullptr,
        "message before init: %s", tutti_last_error());
  float x = 1;
  int64_t one[1] = {1};
  tutti_tensor t = {&x, TUTTI_FLOAT32, 1, one};
  CHECK(tutti_allreduce_async("early", &t, &t, TUTTI_REDUCE_SUM, 1, 1, OnDone, nullptr) ==
            TUTTI_ERR_NOT_INITIALIZED, "allreduce before init");

  Session(1, expected_size);
  Session(2, expected_size);  // init -> shutdown -> init works

  return Finish();
}
