// The shared-memory layer: a Transport that wraps the job's MPI or Gloo transport and runs
// each process set's collectives among ranks of one host through a shm::Group (shm/group.h).
//
// - A set whose members all share this host runs every collective over shared memory.
// - A set spanning hosts runs allreduce hierarchically (TUTTI_HIERARCHICAL_ALLREDUCE, on by
//   default): reduce within each host over shared memory, allreduce across hosts among the
//   first member of each host (a private set of the wrapped transport), then broadcast
//   within the host. Other collectives of such a set use the wrapped transport.
// - Negotiation always uses the wrapped transport.
// Hosts are told apart by the topology's cross rank (MPI: the shared-memory split; Gloo:
// tuttirun's host index). Every member takes part in setting a set up, whether or not its
// host has company, so the wrapped transport's barriers always match; and the members agree
// (one allreduce) that every host's group came up before any is used.
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "transport/transport.h"
#include "base/dtype.h"
#include "base/log.h"
#include "shm/group.h"

namespace tutti {
namespace {

// Ids of the wrapped transport's private sets (one rank per host of set `id`): far above
// the ids users get, which count up from 1.
int32_t LeadersSetId(int32_t id) { return 1000000000 + id; }

struct SetPlan {
  std::unique_ptr<shm::Group> group;  // this host's members, when there are several
  bool all_local = false;             // every member on this host
  bool hierarchical = false;          // allreduce via leaders
  bool leader = false;                // first member of this host
};

class SharedMemoryTransport : public Transport {
 public:
  SharedMemoryTransport(const Config& config, std::unique_ptr<Transport> inner)
      : config_(config), inner_(std::move(inner)), topology_(inner_->topology()) {}

  // Learns every rank's host and a job token, then sets up the global set.
  Status Start() {
    std::vector<std::string> all;
    Status s = inner_->GatherToRoot(std::to_string(topology_.cross_rank), &all);
    std::string shared;
    if (s.ok() && topology_.rank == 0) {
      std::random_device random;
      shared = std::to_string(getpid()) + "x" + std::to_string(random()) +
               std::to_string(random());
      for (const std::string& host : all) shared += "," + host;
    }
    if (s.ok()) s = inner_->BroadcastFromRoot(&shared);
    if (!s.ok()) return s;
    size_t comma = shared.find(',');
    token_ = shared.substr(0, comma);
    while (comma != std::string::npos) {
      const size_t next = shared.find(',', comma + 1);
      hosts_.push_back(std::stoi(shared.substr(comma + 1, next - comma - 1)));
      comma = next;
    }
    std::vector<int32_t> everyone;
    for (int r = 0; r < topology_.size; ++r) everyone.push_back(r);
    return SetUp(TUTTI_GLOBAL_PROCESS_SET, everyone);
  }

  const char* name() const override { return inner_->name(); }
  const Topology& topology() const override { return topology_; }

  Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override {
    return inner_->GatherToRoot(mine, all);
  }
  Status BroadcastFromRoot(std::string* bytes) override { return inner_->BroadcastFromRoot(bytes); }
  Status AgreeFlags(std::vector<uint64_t>* words) override {
    // Every cycle opens with this: when the whole job shares this host, over shared memory.
    SetPlan* plan = Local(TUTTI_GLOBAL_PROCESS_SET);
    if (plan == nullptr) return inner_->AgreeFlags(words);
    const int64_t n = static_cast<int64_t>(words->size());
    flag_words_.resize(n * topology_.size);
    // Every rank's cache holds the same slots, so every rank sends n words.
    Status s = Shm(plan->group->AllgatherEqual(words->data(), flag_words_.data(),
                                               n * static_cast<int64_t>(sizeof(uint64_t))));
    if (!s.ok()) return s;
    for (int r = 0; r < topology_.size; ++r) {
      for (int64_t w = 0; w < n; ++w) (*words)[w] &= flag_words_[r * n + w];
    }
    return Status::OK();
  }

  // A patient shared-memory wait sleeps on a futex at once; a peer's arrival wakes it.
  bool WaitsCheaplyForFlags() override { return Local(TUTTI_GLOBAL_PROCESS_SET) != nullptr; }

  Status AgreeFlagsPatiently(std::vector<uint64_t>* words) override {
    SetPlan* plan = Local(TUTTI_GLOBAL_PROCESS_SET);
    if (plan == nullptr) return AgreeFlags(words);
    plan->group->set_patient(true);
    Status s = AgreeFlags(words);
    plan->group->set_patient(false);
    return s;
  }

  Status AddProcessSet(int32_t id, const std::vector<int32_t>& ranks) override {
    Status s = inner_->AddProcessSet(id, ranks);
    if (!s.ok()) return s;
    return SetUp(id, ranks);
  }

  void RemoveProcessSet(int32_t id) override {
    auto it = plans_.find(id);
    if (it != plans_.end() && it->second.hierarchical) inner_->RemoveProcessSet(LeadersSetId(id));
    if (it != plans_.end() && it->second.group) {
      retired_single_copy_calls_ += static_cast<int64_t>(it->second.group->single_copy_calls());
      retired_streaming_calls_ += static_cast<int64_t>(it->second.group->streaming_calls());
      retired_cpu_moves_ += static_cast<int64_t>(it->second.group->cpu_moves());
    }
    plans_.erase(id);
    inner_->RemoveProcessSet(id);
  }

  Status Allreduce(int32_t set, void* buffer, int64_t count, tutti_dtype dtype,
                   tutti_reduce_op op) override {
    SetPlan* plan = Plan(set);
    if (plan == nullptr || (!plan->all_local && !plan->hierarchical)) {
      return inner_->Allreduce(set, buffer, count, dtype, op);
    }
    if (plan->all_local) return Shm(plan->group->Allreduce(buffer, count, dtype, op));
    Status s;
    if (plan->group) s = Shm(plan->group->Allreduce(buffer, count, dtype, op));
    if (s.ok() && plan->leader) s = inner_->Allreduce(LeadersSetId(set), buffer, count, dtype, op);
    if (s.ok() && plan->group) {
      s = Shm(plan->group->Broadcast(buffer, count * static_cast<int64_t>(DtypeSize(dtype)), 0));
    }
    return s;
  }

  bool ReducesSpans(int32_t set) override { return Local(set) != nullptr; }

  Status AllreduceSpans(int32_t set, const std::vector<AllreduceSpan>& spans, tutti_dtype dtype,
                        tutti_reduce_op op, double factor, int divisor) override {
    SetPlan* plan = Local(set);
    if (plan == nullptr) return Transport::AllreduceSpans(set, spans, dtype, op, factor, divisor);
    std::vector<shm::Group::Span> pieces;
    pieces.reserve(spans.size());
    for (const AllreduceSpan& span : spans) pieces.push_back({span.in, span.out, span.count});
    return Shm(plan->group->AllreduceSpans(pieces, dtype, op, factor, divisor));
  }

  Status Broadcast(int32_t set, void* buffer, int64_t bytes, int root) override {
    if (SetPlan* plan = Local(set)) return Shm(plan->group->Broadcast(buffer, bytes, root));
    return inner_->Broadcast(set, buffer, bytes, root);
  }

  Status Allgatherv(int32_t set, const void* input, void* output,
                    const std::vector<int64_t>& counts, size_t element_size) override {
    if (SetPlan* plan = Local(set)) {
      return Shm(plan->group->Allgatherv(input, output, counts, element_size));
    }
    return inner_->Allgatherv(set, input, output, counts, element_size);
  }

  Status Alltoallv(int32_t set, const void* input, const std::vector<int64_t>& send_counts,
                   void* output, const std::vector<int64_t>& recv_counts,
                   size_t element_size) override {
    if (SetPlan* plan = Local(set)) {
      return Shm(plan->group->Alltoallv(input, send_counts, output, recv_counts, element_size));
    }
    return inner_->Alltoallv(set, input, send_counts, output, recv_counts, element_size);
  }

  Status ReduceScatter(int32_t set, int set_rank, void* buffer, const std::vector<int64_t>& counts,
                       void* output, tutti_dtype dtype, tutti_reduce_op op) override {
    if (SetPlan* plan = Local(set)) {
      return Shm(plan->group->ReduceScatter(set_rank, buffer, counts, output, dtype, op));
    }
    return inner_->ReduceScatter(set, set_rank, buffer, counts, output, dtype, op);
  }

  Status Barrier(int32_t set) override {
    if (SetPlan* plan = Local(set)) return Shm(plan->group->Barrier());
    return inner_->Barrier(set);
  }

  Status SendRecv(int32_t set, int set_size, int peer, const void* send, int64_t send_bytes,
                  void* recv, int64_t recv_bytes) override {
    // Within one host: the group's alltoall (Transport's default); across hosts: the
    // wrapped transport's point-to-point exchange.
    if (Local(set) != nullptr) {
      return Transport::SendRecv(set, set_size, peer, send, send_bytes, recv, recv_bytes);
    }
    return inner_->SendRecv(set, set_size, peer, send, send_bytes, recv, recv_bytes);
  }

  void* FusionBuffer(int32_t set, size_t bytes) override {
    SetPlan* plan = Local(set);
    return plan != nullptr ? plan->group->ScratchBuffer(bytes) : nullptr;
  }

  int64_t SingleCopyCalls() const override {
    int64_t calls = retired_single_copy_calls_;
    for (const auto& item : plans_) {
      if (item.second.group) calls += static_cast<int64_t>(item.second.group->single_copy_calls());
    }
    return calls;
  }

  int64_t StreamingCalls() const override {
    int64_t calls = retired_streaming_calls_;
    for (const auto& item : plans_) {
      if (item.second.group) calls += static_cast<int64_t>(item.second.group->streaming_calls());
    }
    return calls;
  }

  int64_t CpuMoves() const override {
    int64_t moves = retired_cpu_moves_;
    for (const auto& item : plans_) {
      if (item.second.group) moves += static_cast<int64_t>(item.second.group->cpu_moves());
    }
    return moves;
  }

  void Abort() override {
    for (auto& item : plans_) {
      if (item.second.group) item.second.group->Abort("a peer's transport failed");
    }
    inner_->Abort();
  }

 private:
  SetPlan* Plan(int32_t set) {
    auto it = plans_.find(set);
    return it == plans_.end() ? nullptr : &it->second;
  }
  // The plan of a set that runs entirely over this host's shared memory.
  SetPlan* Local(int32_t set) {
    SetPlan* plan = Plan(set);
    return plan != nullptr && plan->all_local ? plan : nullptr;
  }

  static Status Shm(Status s) {
    if (s.ok()) return s;
    const bool peer = s.code() == TUTTI_ERR_ABORTED;
    return Status(s.code(), std::string("shared memory transport failed") +
                                (peer ? " (a peer process may have exited or stopped responding)"
                                      : "") +
                                ": " + s.message());
  }

  // Collective over every rank of the job (the wrapped transport's set changes are).
  Status SetUp(int32_t id, const std::vector<int32_t>& ranks) {
    if (config_.shm == SharedMemoryMode::kOff) return Status::OK();
    std::map<int, std::vector<int32_t>> by_host;
    for (int32_t r : ranks) by_host[hosts_[r]].push_back(r);
    bool company = false;
    for (const auto& host : by_host) company = company || host.second.size() > 1;
    if (!company) return Status::OK();
    const bool spans_hosts = by_host.size() > 1;
    const bool hierarchical = spans_hosts && config_.hierarchical_allreduce;
    // A set across hosts without hierarchical allreduce never uses shared memory.
    if (spans_hosts && !hierarchical) return Status::OK();
    if (hierarchical) {
      std::vector<int32_t> leaders;
      for (const auto& host : by_host) leaders.push_back(host.second[0]);
      std::sort(leaders.begin(), leaders.end());
      Status s = inner_->AddProcessSet(LeadersSetId(id), leaders);
      if (!s.ok()) return s;
    }
    const std::vector<int32_t>& local = by_host[hosts_[topology_.rank]];
    auto me = std::find(local.begin(), local.end(), topology_.rank);
    if (me == local.end()) {
      // Not a member: only the wrapped transport's private set concerned this rank.
      return Status::OK();
    }
    SetPlan plan;
    plan.all_local = !spans_hosts;
    plan.hierarchical = hierarchical;
    plan.leader = *me == local[0];
    auto barrier = [this, id] { return inner_->Barrier(id); };
    Status s;
    if (local.size() > 1) {
      shm::Group::Options options;
      options.timeout_seconds = config_.timeout_seconds;
      options.scratch_bytes = plan.all_local ? static_cast<size_t>(config_.shm_buffer_bytes) : 0;
      options.single_copy = config_.shm_single_copy == SharedMemoryMode::kOn
                                ? shm::Group::Options::SingleCopy::kAlways
                            : config_.shm_single_copy == SharedMemoryMode::kOff
                                ? shm::Group::Options::SingleCopy::kNever
                                : shm::Group::Options::SingleCopy::kAuto;
      options.slot_stores = config_.shm_streaming_stores == SharedMemoryMode::kOn
                                ? shm::Group::Options::SlotStores::kStreaming
                            : config_.shm_streaming_stores == SharedMemoryMode::kOff
                                ? shm::Group::Options::SlotStores::kCached
                                : shm::Group::Options::SlotStores::kAuto;
      // On: every call that the single copy can take (forcing it, for tests and comparisons).
      if (config_.shm_single_copy == SharedMemoryMode::kOn) options.single_copy_bytes = 1;
      const std::string name = "/tutti-" + token_ + "-g" + RendezvousScope(config_) +
                               "-s" + std::to_string(id) + "-h" +
                               std::to_string(hosts_[topology_.rank]);
      s = shm::Group::Create(name, static_cast<int>(me - local.begin()),
                             static_cast<int>(local.size()), options, barrier, &plan.group);
    } else {
      // Alone on this host: still match the barriers of the other hosts' Create.
      for (int i = 0; i < shm::Group::kCreateBarriers && s.ok(); ++i) s = barrier();
    }
    // Every member must know that every host's group is up before any is used.
    int32_t ok = s.ok() ? 1 : 0;
    Status agreed = inner_->Allreduce(id, &ok, 1, TUTTI_INT32, TUTTI_REDUCE_MIN);
    if (!agreed.ok()) return agreed;
    if (ok == 0) {
      const std::string why = s.ok() ? "another host's ranks could not set it up" : s.message();
      if (config_.shm == SharedMemoryMode::kOn) {
        return Status::Aborted("shared memory (TUTTI_SHM=on) for process set " +
                               std::to_string(id) + " failed: " + why);
      }
      if (topology_.rank == ranks[0]) {
        LogWarning("shared memory for process set " + std::to_string(id) +
                   " is off (falling back to " + inner_->name() + "): " + why);
      }
      if (hierarchical) inner_->RemoveProcessSet(LeadersSetId(id));
      return Status::OK();
    }
    plans_[id] = std::move(plan);
    return Status::OK();
  }

  const Config config_;
  std::unique_ptr<Transport> inner_;
  const Topology topology_;
  std::string token_;       // names this job's segments
  std::vector<int> hosts_;  // host index of every rank
  std::map<int32_t, SetPlan> plans_;
  int64_t retired_single_copy_calls_ = 0;  // of the groups of removed process sets
  int64_t retired_streaming_calls_ = 0;
  int64_t retired_cpu_moves_ = 0;
  std::vector<uint64_t> flag_words_;  // every rank's flags, reused
};

}  // namespace

Status AddSharedMemory(const Config& config, std::unique_ptr<Transport>* transport) {
  if (config.shm == SharedMemoryMode::kOff || (*transport)->topology().size == 1) {
    return Status::OK();
  }
  std::unique_ptr<SharedMemoryTransport> wrapped(
      new SharedMemoryTransport(config, std::move(*transport)));
  Status s = wrapped->Start();
  if (!s.ok()) return s;
  *transport = std::move(wrapped);
  return Status::OK();
}

}  // namespace tutti
