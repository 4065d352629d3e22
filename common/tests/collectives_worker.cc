// Multi-process check of every collective besides plain allreduce, through the C ABI only:
// allgather (first dimensions differ per rank, grouped), broadcast from every root,
// alltoall (equal and explicit splits), reducescatter (uneven rows, every op, scale factors,
// grouped), grouped allreduce and barrier, each for every dtype and 1-3 dimensions, submitted
// together (the second time in a different random order on each rank); then the mismatch and enqueue-time errors with the
// message each rank sees. Exits 0 when every check passed.
#include <cstdlib>
#include <functional>
#include <random>

#include "worker_util.h"

using namespace worker;

namespace {

int rank_ = 0, size_ = 1;

// Element i of the tensor `rank` contributes for case `salt`: small positive integers, so
// every result below is exact in every dtype (bool: 0 or 1).
double Value(tutti_dtype d, int rank, size_t i, int salt = 0) {
  if (d == TUTTI_BOOL) return (rank + i + salt) % 2 == 0 || i % 3 == 0 ? 1 : 0;
  return static_cast<double>((rank * 7 + i * 3 + salt) % 5 + 1);
}

std::vector<int64_t> Dims(int64_t rows, int ndim) {
  std::vector<int64_t> shape = {rows, 2, 3};
  shape.resize(ndim);
  return shape;
}

int64_t Count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A submitted case: its request data (kept alive until done) and how to check the result.
struct Case {
  std::string name;
  tutti_dtype dtype = TUTTI_FLOAT32;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::vector<char>> inputs;
  std::vector<tutti_tensor> views;
  std::vector<int32_t> splits, received;
  Call call;
  std::function<void(Case&)> verify;
  tutti_request request = {};
};

std::vector<std::unique_ptr<Case>> cases;

Case* NewCase(const std::string& name, tutti_dtype d) {
  cases.emplace_back(new Case());
  Case* c = cases.back().get();
  c->name = name;
  c->dtype = d;
  c->call.element_size = ElementSize(d);
  return c;
}

// Adds an input tensor of `shape` filled by value(i).
void AddInput(Case* c, std::vector<int64_t> shape, const std::function<double(size_t)>& value) {
  c->shapes.push_back(shape);
  std::vector<char> data(std::max<int64_t>(Count(shape), 1) * ElementSize(c->dtype));
  for (int64_t i = 0; i < Count(shape); ++i) Store(c->dtype, data.data(), i, value(i));
  c->inputs.push_back(std::move(data));
}

// Records the request; RunAll submits every case, in an order that differs per rank.
void Submit(Case* c, tutti_request r) { c->request = r; }

void Enqueue(Case* c) {
  tutti_request r = c->request;
  c->views.clear();
  for (size_t t = 0; t < c->inputs.size(); ++t) {
    c->views.push_back({c->inputs[t].data(), c->dtype, static_cast<int32_t>(c->shapes[t].size()),
                        c->shapes[t].data()});
  }
  r.name = c->name.c_str();
  r.num_tensors = static_cast<int32_t>(c->views.size());
  r.inputs = c->views.data();
  if (r.collective == TUTTI_OP_ALLREDUCE || r.collective == TUTTI_OP_BROADCAST) {
    r.outputs = c->views.data();  // in place
  }
  tutti_status s = worker::Enqueue(&r);
  CHECK(s == TUTTI_OK, "enqueue %s: %s", c->name.c_str(), tutti_last_error());
  if (s != TUTTI_OK) c->verify = nullptr;
}

void AddAllgathers() {
  for (int d = TUTTI_UINT8; d <= TUTTI_BOOL; ++d) {
    for (int ndim = 1; ndim <= 3; ++ndim) {
      tutti_dtype dt = static_cast<tutti_dtype>(d);
      Case* c = NewCase("allgather." + std::string(DtypeName(dt)) + "." + std::to_string(ndim), dt);
      auto rows = [](int r) { return r == 1 ? 0 : r + 1; };  // rank 1 sends nothing
      for (int t = 0; t < (d == TUTTI_FLOAT32 ? 2 : 1); ++t) {  // float32: grouped
        AddInput(c, Dims(rows(rank_), ndim), [=](size_t i) { return Value(dt, rank_, i, t); });
      }
      c->verify = [=](Case& c) {
        for (size_t t = 0; t < c.shapes.size(); ++t) {
          int64_t total = 0;
          for (int r = 0; r < size_; ++r) total += rows(r);
          CHECK(c.call.shapes[t] == Dims(total, ndim), "%s: output shape", c.name.c_str());
          size_t k = 0;
          bool ok = true;
          for (int r = 0; r < size_; ++r) {
            for (int64_t i = 0; i < Count(Dims(rows(r), ndim)); ++i, ++k) {
              ok = ok && Load(dt, c.call.outputs[t].data(), k) == Value(dt, r, i, t);
            }
          }
          CHECK(ok, "%s: gathered values", c.name.c_str());
        }
      };
      Submit(c, Request("", TUTTI_OP_ALLGATHER, &c->call));
    }
  }
}

void AddBroadcasts() {
  for (int d = TUTTI_UINT8; d <= TUTTI_BOOL; ++d) {
    for (int root = 0; root < size_; ++root) {
      tutti_dtype dt = static_cast<tutti_dtype>(d);
      const int ndim = 1 + (d + root) % 3;
      Case* c = NewCase("broadcast." + std::string(DtypeName(dt)) + ".root" +
                        std::to_string(root), dt);
      AddInput(c, Dims(2, ndim), [=](size_t i) { return Value(dt, rank_, i); });
      c->verify = [=](Case& c) {
        bool ok = true;
        for (int64_t i = 0; i < Count(c.shapes[0]); ++i) {
          ok = ok && Load(dt, c.inputs[0].data(), i) == Value(dt, root, i);
        }
        CHECK(ok, "%s: root's values", c.name.c_str());
      };
      tutti_request r = Request("", TUTTI_OP_BROADCAST, &c->call);
      r.root_rank = root;
      Submit(c, r);
    }
  }
}

void AddAlltoalls() {
  for (int d = TUTTI_UINT8; d <= TUTTI_BOOL; ++d) {
    for (int explicit_splits = 0; explicit_splits < 2; ++explicit_splits) {
      tutti_dtype dt = static_cast<tutti_dtype>(d);
      const int ndim = 1 + d % 3;
      // Rows rank `from` sends to rank `to`.
      auto sends = [=](int from, int to) { return explicit_splits ? (from + 2 * to) % 3 : 2; };
      Case* c = NewCase("alltoall." + std::string(DtypeName(dt)) +
                        (explicit_splits ? ".splits" : ".equal"), dt);
      int64_t rows = 0;
      for (int to = 0; to < size_; ++to) {
        c->splits.push_back(sends(rank_, to));
        rows += sends(rank_, to);
      }
      c->received.assign(size_, -1);
      AddInput(c, Dims(rows, ndim), [=](size_t i) { return Value(dt, rank_, i); });
      c->verify = [=](Case& c) {
        const int64_t row = Count(Dims(1, ndim));
        size_t k = 0;
        bool ok = true;
        int64_t total = 0;
        for (int from = 0; from < size_; ++from) {
          CHECK(c.received[from] == sends(from, rank_), "%s: received_splits[%d] = %d",
                c.name.c_str(), from, c.received[from]);
          int64_t offset = 0;
          for (int to = 0; to < rank_; ++to) offset += sends(from, to);
          for (int64_t i = 0; i < sends(from, rank_) * row; ++i, ++k) {
            ok = ok && Load(dt, c.call.outputs[0].data(), k) == Value(dt, from, offset * row + i);
          }
          total += sends(from, rank_);
        }
        CHECK(c.call.shapes[0] == Dims(total, ndim), "%s: output shape", c.name.c_str());
        CHECK(ok, "%s: received values", c.name.c_str());
      };
      tutti_request r = Request("", TUTTI_OP_ALLTOALL, &c->call);
      r.splits = explicit_splits ? c->splits.data() : nullptr;
      r.received_splits = c->received.data();
      Submit(c, r);
    }
  }
}

// The reduction of every rank's Value(d, r, i) with op, as the core documents it.
double Reduced(tutti_dtype d, tutti_reduce_op op, size_t i, double pre, double post,
               int salt) {
  double acc = 0;
  for (int r = 0; r < size_; ++r) {
    double v = Value(d, r, i, salt) * pre;
    if (IsInteger(d)) v = std::trunc(v);  // prescale is applied per rank, truncating
    if (r == 0) acc = v;
    else if (d == TUTTI_BOOL) acc = (op == TUTTI_REDUCE_SUM || op == TUTTI_REDUCE_MAX) ? (acc || v) : (acc && v);
    else if (op == TUTTI_REDUCE_MIN) acc = std::min(acc, v);
    else if (op == TUTTI_REDUCE_MAX) acc = std::max(acc, v);
    else if (op == TUTTI_REDUCE_PRODUCT) acc *= v;
    else acc += v;
  }
  double result = acc * (post / (op == TUTTI_REDUCE_AVERAGE ? size_ : 1));
  // Integers are scaled in double and truncated toward zero, as in Horovod 0.28.1.
  return IsInteger(d) ? std::trunc(result) : result;
}

void AddReduceCollectives() {
  for (int d = TUTTI_UINT8; d <= TUTTI_BOOL; ++d) {
    for (int o = TUTTI_REDUCE_AVERAGE; o <= TUTTI_REDUCE_PRODUCT; ++o) {
      tutti_dtype dt = static_cast<tutti_dtype>(d);
      tutti_reduce_op op = static_cast<tutti_reduce_op>(o);
      if (dt == TUTTI_BOOL && op == TUTTI_REDUCE_AVERAGE) continue;
      const bool scaled = dt == TUTTI_FLOAT32 && op == TUTTI_REDUCE_SUM;
      const double pre = scaled ? 0.5 : 1, post = scaled ? 3 : 1;
      const int ndim = 1 + (d + o) % 3;
      const int64_t rows = 2 * size_ + 1;  // uneven: the first rank gets an extra row
      const int groups = dt == TUTTI_FLOAT64 ? 2 : 1;
      for (int which = 0; which < 2; ++which) {
        const bool scatter = which == 0;
        Case* c = NewCase(std::string(scatter ? "reducescatter." : "grouped_allreduce.") +
                          DtypeName(dt) + "." + std::to_string(o), dt);
        if (!scatter && groups == 1) {
          cases.pop_back();
          continue;
        }
        for (int t = 0; t < groups; ++t) {
          AddInput(c, Dims(rows + t, ndim), [=](size_t i) { return Value(dt, rank_, i, t); });
        }
        c->verify = [=](Case& c) {
          for (int t = 0; t < groups; ++t) {
            const int64_t all_rows = rows + t;
            int64_t first = 0, mine = all_rows / size_ + (rank_ < all_rows % size_ ? 1 : 0);
            for (int r = 0; r < rank_; ++r) first += all_rows / size_ + (r < all_rows % size_ ? 1 : 0);
            const int64_t row = Count(Dims(1, ndim));
            const void* got = scatter ? c.call.outputs[t].data() : c.inputs[t].data();
            if (scatter) {
              CHECK(c.call.shapes[t] == Dims(mine, ndim), "%s: my part's shape", c.name.c_str());
            } else {
              first = 0;
              mine = all_rows;
            }
            bool ok = true;
            for (int64_t i = 0; i < mine * row; ++i) {
              double expected = Reduced(dt, op, first * row + i, pre, post, t);
              double value = Load(dt, got, i);
              if (!Close(dt, value, expected)) {
                if (ok) std::fprintf(stderr, "%s[%lld]: %g != %g\n", c.name.c_str(), (long long)i, value, expected);
                ok = false;
              }
            }
            CHECK(ok, "%s: reduced values", c.name.c_str());
          }
        };
        tutti_request r = Request("", scatter ? TUTTI_OP_REDUCESCATTER : TUTTI_OP_ALLREDUCE, &c->call);
        r.reduce_op = op;
        r.prescale = pre;
        r.postscale = post;
        Submit(c, r);
      }
    }
  }
}

void RunAll(bool shuffle) {
  cases.clear();
  AddAllgathers();
  AddBroadcasts();
  AddAlltoalls();
  AddReduceCollectives();
  Case* barrier = NewCase("barrier", TUTTI_FLOAT32);
  barrier->verify = [](Case&) {};
  Submit(barrier, Request("", TUTTI_OP_BARRIER, &barrier->call));
  std::vector<Case*> order;
  for (auto& c : cases) order.push_back(c.get());
  if (shuffle) {
    std::mt19937 random(1234 + rank_);
    std::shuffle(order.begin(), order.end(), random);
  }
  for (Case* c : order) Enqueue(c);
  for (auto& c : cases) {
    if (!c->verify) continue;
    bool finished = Wait(&c->call);
    CHECK(finished && c->call.status == TUTTI_OK, "%s: %s", c->name.c_str(),
          finished ? c->call.message.c_str() : "timed out");
    if (finished && c->call.status == TUTTI_OK) c->verify(*c);
  }
}

// Enqueues a one-tensor request; returns the enqueue status and, when queued, waits for it.
tutti_status Try(tutti_request r, Call* call, float* data, std::vector<int64_t> shape) {
  tutti_tensor t = {data, TUTTI_FLOAT32, static_cast<int32_t>(shape.size()), shape.data()};
  r.inputs = &t;
  r.num_tensors = 1;
  if (r.collective == TUTTI_OP_ALLREDUCE || r.collective == TUTTI_OP_BROADCAST) r.outputs = &t;
  tutti_status s = worker::Enqueue(&r);
  if (s == TUTTI_OK) CHECK(Wait(call), "%s finished", r.name);
  return s;
}

void CheckErrors() {
  float data[12] = {0};
  {
    Call call;
    tutti_request r = Request("bad.root", TUTTI_OP_BROADCAST, &call);
    r.root_rank = 5;
    CHECK(Try(r, &call, data, {3}) == TUTTI_ERR_INVALID_ARGUMENT, "root out of range accepted");
    std::string expected = "broadcast of 'bad.root': root_rank 5 is out of range for a process "
                           "set of size " + std::to_string(size_);
    CHECK(tutti_last_error() == expected, "message: %s", tutti_last_error());
  }
  if (size_ < 2) return;
  {
    Call call;
    tutti_request r = Request("odd.alltoall", TUTTI_OP_ALLTOALL, &call);
    tutti_status s = Try(r, &call, data, {2 * size_ + 1});
    CHECK(s == TUTTI_ERR_INVALID_ARGUMENT && std::strstr(tutti_last_error(), "not divisible"),
          "indivisible alltoall: %s", tutti_last_error());
  }
  {
    Call call;
    tutti_request r = Request("root.mismatch", TUTTI_OP_BROADCAST, &call);
    r.root_rank = rank_ % 2;
    CHECK(Try(r, &call, data, {3}) == TUTTI_OK, "enqueue root.mismatch");
    std::string expected = "broadcast of tensor 'root.mismatch': ranks disagree: root_rank "
                           "differs: 0 on rank" + std::string(size_ > 2 ? "s 0, 2" : " 0") +
                           "; 1 on rank 1";
    CHECK(call.status == TUTTI_ERR_PRECONDITION && call.message == expected, "message: %s",
          call.message.c_str());
    if (rank_ == 0) std::printf("rank 0 sees: %s\n", call.message.c_str());
  }
  {
    Call call;
    tutti_request r = Request("gather.mismatch", TUTTI_OP_ALLGATHER, &call);
    CHECK(Try(r, &call, data, {1, rank_ == 1 ? 3 : 2}) == TUTTI_OK, "enqueue gather.mismatch");
    CHECK(call.status == TUTTI_ERR_PRECONDITION &&
              call.message.find("shape (all but the first dimension) differs") != std::string::npos &&
              call.message.find("[3] on rank 1") != std::string::npos,
          "message: %s", call.message.c_str());
    if (rank_ == 1) std::printf("rank 1 sees: %s\n", call.message.c_str());
  }
  {
    Call call;
    tutti_request r = Request("op.mismatch", TUTTI_OP_REDUCESCATTER, &call);
    r.reduce_op = rank_ == 0 ? TUTTI_REDUCE_SUM : TUTTI_REDUCE_MAX;
    CHECK(Try(r, &call, data, {4}) == TUTTI_OK, "enqueue op.mismatch");
    CHECK(call.status == TUTTI_ERR_PRECONDITION &&
              call.message.find("reducescatter of tensor 'op.mismatch': ranks disagree: reduce "
                                "op differs: sum on rank 0; max on rank") != std::string::npos,
          "message: %s", call.message.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int expected_size = argc > 1 ? std::atoi(argv[1]) : 0;
  CHECK(tutti_init() == TUTTI_OK, "init: %s", tutti_last_error());
  rank_ = my_rank = tutti_rank();
  size_ = tutti_size();
  if (expected_size > 0) CHECK(size_ == expected_size, "size %d", size_);
  const bool mpi = std::string(tutti_controller()) == "mpi";
  CHECK(tutti_mpi_threads_supported() == (mpi ? 1 : 0), "mpi_threads_supported");
  RunAll(false);
  RunAll(true);  // again, each rank submitting in its own random order; names are reused
  CheckErrors();
  CHECK(tutti_shutdown() == TUTTI_OK, "shutdown");
  return Finish();
}
