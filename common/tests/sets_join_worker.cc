// Multi-process check of process sets and join through the C ABI only: a static-style set
// added right after init, collectives on a set that excludes some ranks (which are refused
// there), a dynamic add/remove, join with uneven work (joined ranks contribute zeros, AVERAGE
// divides by the full size, join returns the last rank), other collectives failing while a rank
// is joined, and join again in a second "epoch". Exits 0 when every check passed.
#include <cstdlib>
#include <thread>

#include "worker_util.h"

using namespace worker;

namespace {

int rank_ = 0, size_ = 1;

// Runs a one-tensor float32 request on `set` and waits; returns the completion status.
tutti_status Run(const char* name, tutti_collective collective, int32_t set, float* data,
                 int64_t rows, Call* call, tutti_reduce_op op = TUTTI_REDUCE_SUM, int root = 0) {
  int64_t shape[1] = {rows};
  tutti_tensor t = {data, TUTTI_FLOAT32, 1, shape};
  tutti_request r = Request(name, collective, call);
  r.process_set = set;
  r.num_tensors = 1;
  r.inputs = &t;
  if (collective == TUTTI_OP_ALLREDUCE || collective == TUTTI_OP_BROADCAST) r.outputs = &t;
  r.reduce_op = op;
  r.root_rank = root;
  tutti_status s = worker::Enqueue(&r);
  if (s != TUTTI_OK) return s;
  CHECK(Wait(call), "%s finished", name);
  return call->status;
}

void CheckSubset() {
  // Every rank but rank 1 (just rank 0 in a job of 1).
  std::vector<int32_t> members;
  for (int r = 0; r < size_; ++r) {
    if (r != 1) members.push_back(r);
  }
  int32_t id = -1;
  CHECK(tutti_add_process_set(members.data(), static_cast<int32_t>(members.size()), &id) ==
            TUTTI_OK, "add_process_set: %s", tutti_last_error());
  CHECK(id == 1, "first process set id %d", id);
  const bool member = rank_ != 1;
  CHECK(tutti_process_set_size(id) == static_cast<int>(members.size()), "set size");
  CHECK(tutti_process_set_rank(id) == (member ? (rank_ == 0 ? 0 : rank_ - 1) : -1), "set rank");
  std::vector<int32_t> listed(8, -1);
  CHECK(tutti_process_set_ranks(id, listed.data(), 8) == static_cast<int>(members.size()) &&
            std::equal(members.begin(), members.end(), listed.begin()),
        "set ranks");
  if (member) {
    const int set_rank = tutti_process_set_rank(id);
    float value = static_cast<float>(rank_ + 1);
    Call sum;
    CHECK(Run("set.sum", TUTTI_OP_ALLREDUCE, id, &value, 1, &sum) == TUTTI_OK, "set.sum: %s",
          sum.message.c_str());
    float expected = 0;
    for (int32_t r : members) expected += r + 1;
    CHECK(value == expected, "set.sum %f, expected %f", value, expected);
    const int root = members.back();  // root_rank is global: the set's last member
    float mine = static_cast<float>(rank_ * 10);
    Call bcast;
    CHECK(Run("set.bcast", TUTTI_OP_BROADCAST, id, &mine, 1, &bcast, TUTTI_REDUCE_SUM, root) ==
              TUTTI_OK, "set.bcast: %s", bcast.message.c_str());
    CHECK(mine == members.back() * 10.0f, "set.bcast got %f", mine);
    if (size_ > 1) {
      // Global rank 1 is not a member: refused at enqueue, naming the set's ranks.
      Call refused;
      CHECK(Run("set.bcast.outsider", TUTTI_OP_BROADCAST, id, &mine, 1, &refused,
                TUTTI_REDUCE_SUM, 1) == TUTTI_ERR_INVALID_ARGUMENT,
            "a root outside the set accepted");
      std::string list;
      for (size_t i = 0; i < members.size(); ++i) {
        list += (i ? ", " : "") + std::to_string(members[i]);
      }
      const std::string expected = "broadcast of 'set.bcast.outsider': root_rank 1 is not a "
                                   "member of process set 1 (ranks " + list + ")";
      CHECK(tutti_last_error() == expected, "message: %s", tutti_last_error());
    }
    std::vector<float> rows(set_rank + 1, static_cast<float>(rank_));
    Call gather;
    CHECK(Run("set.gather", TUTTI_OP_ALLGATHER, id, rows.data(), set_rank + 1, &gather) ==
              TUTTI_OK, "set.gather: %s", gather.message.c_str());
    size_t k = 0;
    bool ok = true;
    for (size_t i = 0; i < members.size(); ++i) {
      for (size_t j = 0; j <= i; ++j, ++k) {
        ok = ok && Load(TUTTI_FLOAT32, gather.outputs[0].data(), k) == members[i];
      }
    }
    CHECK(ok, "set.gather values");
  } else {
    float value = 1;
    Call refused;
    CHECK(Run("set.sum", TUTTI_OP_ALLREDUCE, id, &value, 1, &refused) ==
              TUTTI_ERR_INVALID_ARGUMENT, "non-member enqueue accepted");
    CHECK(std::string(tutti_last_error()) ==
              "allreduce of 'set.sum': this rank (1) is not in process set 1",
          "message: %s", tutti_last_error());
  }
  // Meanwhile the global set still works for everyone.
  float all = 1;
  Call global;
  CHECK(Run("global.after.set", TUTTI_OP_ALLREDUCE, 0, &all, 1, &global) == TUTTI_OK &&
            all == size_, "global allreduce with a set present");
  CHECK(tutti_remove_process_set(id) == TUTTI_OK, "remove: %s", tutti_last_error());
  CHECK(tutti_process_set_size(id) == -1, "removed set still has a size");
  float value = 1;
  Call gone;
  CHECK(Run("set.gone", TUTTI_OP_ALLREDUCE, id, &value, 1, &gone) == TUTTI_ERR_INVALID_ARGUMENT &&
            std::strstr(tutti_last_error(), "process set 1 is unknown"),
        "use of a removed set: %s", tutti_last_error());
  CHECK(tutti_remove_process_set(0) == TUTTI_ERR_INVALID_ARGUMENT, "removing the global set");
  // A dynamic set of the last rank only, then a bad one.
  int32_t last = size_ - 1, solo = -1;
  CHECK(tutti_add_process_set(&last, 1, &solo) == TUTTI_OK && solo == 2, "solo set %d", solo);
  if (rank_ == last) {
    float v = 5;
    Call call;
    CHECK(Run("solo.sum", TUTTI_OP_ALLREDUCE, solo, &v, 1, &call) == TUTTI_OK && v == 5,
          "solo.sum %f", v);
  }
  CHECK(tutti_remove_process_set(solo) == TUTTI_OK, "remove solo");
  int32_t bad[2] = {0, 0}, unused;
  CHECK(tutti_add_process_set(bad, 2, &unused) == TUTTI_ERR_INVALID_ARGUMENT &&
            std::strstr(tutti_last_error(), "sorted and distinct"),
        "unsorted set: %s", tutti_last_error());
}

int32_t Join(Call* call) {
  int32_t result = -2;
  tutti_request r = Request(nullptr, TUTTI_OP_JOIN, call);
  r.result = &result;
  CHECK(worker::Enqueue(&r) == TUTTI_OK, "join: %s", tutti_last_error());
  CHECK(Wait(call), "join finished");
  CHECK(call->status == TUTTI_OK, "join: %s", call->message.c_str());
  return result;
}

void CheckJoin() {
  // Uneven work: rank 0 runs 3 allreduces, rank r > 0 runs r. Each rank contributes r + 1.
  // Rank 0's last allreduces wait until every other rank joined, so rank 0 joins last.
  auto work = [](int r) { return r == 0 ? 3 : r; };
  for (int i = 0; i < work(rank_); ++i) {
    const bool average = i == 2;
    float value = static_cast<float>(rank_ + 1);
    Call call;
    std::string name = "uneven." + std::to_string(i);
    float expected = 0;
    for (int r = 0; r < size_; ++r) {
      if (work(r) > i) expected += r + 1;
    }
    if (i == 1) {
      // A grouped allreduce: joined ranks take part in the one fused reduction.
      float second[3] = {value, 2 * value, 3 * value};
      int64_t one = 1, three = 3;
      tutti_tensor views[2] = {{&value, TUTTI_FLOAT32, 1, &one},
                               {second, TUTTI_FLOAT32, 1, &three}};
      tutti_request r = Request(name.c_str(), TUTTI_OP_ALLREDUCE, &call);
      r.num_tensors = 2;
      r.inputs = r.outputs = views;
      CHECK(worker::Enqueue(&r) == TUTTI_OK && Wait(&call) && call.status == TUTTI_OK,
            "%s: %s", name.c_str(), call.message.c_str());
      CHECK(second[0] == expected && second[1] == 2 * expected && second[2] == 3 * expected,
            "%s second tensor %f %f %f", name.c_str(), second[0], second[1], second[2]);
    } else {
      CHECK(Run(name.c_str(), TUTTI_OP_ALLREDUCE, 0, &value, 1, &call,
                average ? TUTTI_REDUCE_AVERAGE : TUTTI_REDUCE_SUM) == TUTTI_OK,
            "%s: %s", name.c_str(), call.message.c_str());
    }
    if (average) expected /= size_;  // joined ranks count in the divisor
    CHECK(value == expected, "%s = %f, expected %f", name.c_str(), value, expected);
  }
  Call join;
  const int32_t last = Join(&join);
  CHECK(last == 0, "join returned %d, expected 0", last);

  if (size_ < 2) return;
  // Second epoch: rank 1 joins first; a broadcast by the others fails naming it.
  Call join2;
  int32_t last2 = -2;
  if (rank_ == 1) {
    last2 = Join(&join2);
  } else {
    float v = 0;
    Call bcast;
    CHECK(Run("while.joined", TUTTI_OP_BROADCAST, 0, &v, 1, &bcast) == TUTTI_ERR_PRECONDITION,
          "broadcast while joined");
    CHECK(bcast.message == "broadcast of tensor 'while.joined': rank 1 has joined (called "
                           "join()) and cannot take part; only allreduce runs while ranks are "
                           "joined",
          "message: %s", bcast.message.c_str());
    if (rank_ == 0) std::printf("rank 0 sees: %s\n", bcast.message.c_str());
    last2 = Join(&join2);
  }
  CHECK(last2 >= 0 && last2 < size_ && last2 != 1, "second join returned %d", last2);
  // Every rank got the same answer.
  float lo = static_cast<float>(last2), hi = lo;
  Call a, b;
  CHECK(Run("join.min", TUTTI_OP_ALLREDUCE, 0, &lo, 1, &a, TUTTI_REDUCE_MIN) == TUTTI_OK &&
            Run("join.max", TUTTI_OP_ALLREDUCE, 0, &hi, 1, &b, TUTTI_REDUCE_MAX) == TUTTI_OK &&
            lo == hi,
        "join results differ across ranks");
}

}  // namespace

int main(int argc, char** argv) {
  const int expected_size = argc > 1 ? std::atoi(argv[1]) : 0;
  for (int round = 0; round < 2; ++round) {  // everything works again after re-init
    CHECK(tutti_init() == TUTTI_OK, "init: %s", tutti_last_error());
    rank_ = my_rank = tutti_rank();
    size_ = tutti_size();
    if (expected_size > 0) CHECK(size_ == expected_size, "size %d", size_);
    CheckSubset();
    CheckJoin();
    CHECK(tutti_shutdown() == TUTTI_OK, "shutdown");
    CHECK(tutti_process_set_size(0) == -1, "process set query after shutdown");
  }
  return Finish();
}
