// MPI transport: a private duplicate of MPI_COMM_WORLD, local/cross communicators from the
// shared-memory split, negotiation with nonblocking collectives polled by a waiter that sleeps
// (Open MPI's blocking calls spin a core while waiting for idle peers), and MPI_Allreduce for
// data (user-defined ops where MPI has no matching built-in).
// Only the MPI C API: the C++ bindings would need libmpi_cxx (gone in Open MPI 5).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <thread>
#include <utility>

#include "transport/transport.h"
#include "base/dtype.h"
#include "base/log.h"
#include "transport/mpi_datatypes.h"
#include "transport/mpi_runtime.h"
#include "kernels/reduce_kernels.h"

namespace tutti {
namespace {

Status MpiCall(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status::OK();
  return Status::Internal(std::string(what) + " failed: " + MpiErrorString(rc));
}

class MpiTransport : public Transport {
 public:
  explicit MpiTransport(double timeout_seconds) : timeout_seconds_(timeout_seconds) {}

  ~MpiTransport() override {
    if (Finalized()) return;  // the application finalized MPI; its objects are gone
    for (auto& item : user_ops_) MPI_Op_free(&item.second);
    for (auto& item : sets_) MPI_Comm_free(&item.second);
    for (MPI_Comm* comm : {&cross_, &local_, &world_}) {
      if (*comm != MPI_COMM_NULL) MPI_Comm_free(comm);
    }
  }

  Status Connect() {
    Status s;
    if (!(s = MpiCall(MPI_Comm_dup(MPI_COMM_WORLD, &world_), "MPI_Comm_dup")).ok()) return s;
    MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(world_, &topology_.rank);
    MPI_Comm_size(world_, &topology_.size);
    s = MpiCall(MPI_Comm_split_type(world_, MPI_COMM_TYPE_SHARED, topology_.rank, MPI_INFO_NULL,
                                    &local_),
                "MPI_Comm_split_type");
    if (!s.ok()) return s;
    MPI_Comm_rank(local_, &topology_.local_rank);
    MPI_Comm_size(local_, &topology_.local_size);
    s = MpiCall(MPI_Comm_split(world_, topology_.local_rank, topology_.rank, &cross_),
                "MPI_Comm_split");
    if (!s.ok()) return s;
    MPI_Comm_rank(cross_, &topology_.cross_rank);
    MPI_Comm_size(cross_, &topology_.cross_size);
    return Status::OK();
  }

  const char* name() const override { return "mpi"; }
  const Topology& topology() const override { return topology_; }

  Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override {
    if (Finalized()) return FinalizedError();
    const bool root = topology_.rank == 0;
    int length = static_cast<int>(mine.size());
    std::vector<int> lengths(root ? topology_.size : 0);
    MPI_Request request;
    Status s = MpiCall(MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, world_,
                                   &request),
                       "MPI_Igather");
    if (!s.ok() || !(s = Wait(&request, "negotiation")).ok()) return s;
    std::vector<int> offsets(lengths.size());
    std::string joined;
    if (root) {
      size_t total = 0;
      for (size_t r = 0; r < lengths.size(); ++r) {
        offsets[r] = static_cast<int>(total);
        total += lengths[r];
      }
      joined.resize(total);
    }
    s = MpiCall(MPI_Igatherv(mine.data(), length, MPI_BYTE, &joined[0], lengths.data(),
                             offsets.data(), MPI_BYTE, 0, world_, &request),
                "MPI_Igatherv");
    if (!s.ok() || !(s = Wait(&request, "negotiation")).ok()) return s;
    all->clear();
    for (size_t r = 0; r < lengths.size(); ++r) all->push_back(joined.substr(offsets[r], lengths[r]));
    return Status::OK();
  }

  Status BroadcastFromRoot(std::string* bytes) override {
    if (Finalized()) return FinalizedError();
    uint64_t length = bytes->size();
    MPI_Request request;
    Status s = MpiCall(MPI_Ibcast(&length, 1, MPI_UINT64_T, 0, world_, &request), "MPI_Ibcast");
    if (!s.ok() || !(s = Wait(&request, "negotiation")).ok()) return s;
    bytes->resize(length);
    s = MpiCall(MPI_Ibcast(&(*bytes)[0], static_cast<int>(length), MPI_BYTE, 0, world_, &request),
                "MPI_Ibcast");
    if (!s.ok() || !(s = Wait(&request, "negotiation")).ok()) return s;
    return Status::OK();
  }

  Status AgreeFlags(std::vector<uint64_t>* words) override {
    if (Finalized()) return FinalizedError();
    MPI_Request request;
    Status s = MpiCall(MPI_Iallreduce(MPI_IN_PLACE, words->data(), static_cast<int>(words->size()),
                                      MPI_UINT64_T, MPI_BAND, world_, &request),
                       "MPI_Iallreduce");
    if (!s.ok()) return s;
    return Wait(&request, "negotiation");
  }

  Status AddProcessSet(int32_t id, const std::vector<int32_t>& ranks) override {
    if (Finalized()) return FinalizedError();
    bool member = false;
    for (int32_t r : ranks) member = member || r == topology_.rank;
    MPI_Comm comm = MPI_COMM_NULL;
    Status s = MpiCall(MPI_Comm_split(world_, member ? 0 : MPI_UNDEFINED, topology_.rank, &comm),
                       "MPI_Comm_split");
    if (!s.ok()) return s;
    if (comm != MPI_COMM_NULL) {
      MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
      sets_[id] = comm;
    }
    return Status::OK();
  }

  void RemoveProcessSet(int32_t id) override {
    auto it = sets_.find(id);
    if (it == sets_.end()) return;
    if (!Finalized()) MPI_Comm_free(&it->second);
    sets_.erase(it);
  }

  Status Allreduce(int32_t set, void* buffer, int64_t count, tutti_dtype dtype,
                   tutti_reduce_op op) override {
    MPI_Comm comm;
    MPI_Op mpi_op;
    Status s = Prepare(set, dtype, op, &comm, &mpi_op);
    if (!s.ok()) return s;
    // MPI counts are int: reduce very large buffers in chunks.
    const int64_t kMaxChunk = int64_t(1) << 30;
    char* bytes = static_cast<char*>(buffer);
    const size_t element = DtypeSize(dtype);
    for (int64_t done = 0; done < count; done += kMaxChunk) {
      int chunk = static_cast<int>(std::min(kMaxChunk, count - done));
      s = MpiCall(MPI_Allreduce(MPI_IN_PLACE, bytes + done * element, chunk,
                                StorageDatatype(dtype), mpi_op, comm),
                  "MPI_Allreduce");
      if (!s.ok()) return s;
    }
    return Status::OK();
  }

  Status Broadcast(int32_t set, void* buffer, int64_t bytes, int root) override {
    MPI_Comm comm;
    Status s = Comm(set, &comm);
    const int64_t kMaxChunk = int64_t(1) << 30;
    char* data = static_cast<char*>(buffer);
    for (int64_t done = 0; s.ok() && done < bytes; done += kMaxChunk) {
      int chunk = static_cast<int>(std::min(kMaxChunk, bytes - done));
      s = MpiCall(MPI_Bcast(data + done, chunk, MPI_BYTE, root, comm), "MPI_Bcast");
    }
    return s;
  }

  Status Allgatherv(int32_t set, const void* input, void* output,
                    const std::vector<int64_t>& counts, size_t element_size) override {
    MPI_Comm comm;
    std::vector<int> ints, offsets;
    Status s = Comm(set, &comm);
    if (s.ok()) s = MpiCounts(counts, &ints, &offsets);
    if (!s.ok()) return s;
    int me;
    MPI_Comm_rank(comm, &me);
    const MPI_Datatype type = ElementDatatype(element_size);
    return MpiCall(MPI_Allgatherv(input, ints[me], type, output, ints.data(), offsets.data(),
                                  type, comm),
                   "MPI_Allgatherv");
  }

  Status Alltoallv(int32_t set, const void* input, const std::vector<int64_t>& send_counts,
                   void* output, const std::vector<int64_t>& recv_counts,
                   size_t element_size) override {
    MPI_Comm comm;
    std::vector<int> sends, send_offsets, recvs, recv_offsets;
    Status s = Comm(set, &comm);
    if (s.ok()) s = MpiCounts(send_counts, &sends, &send_offsets);
    if (s.ok()) s = MpiCounts(recv_counts, &recvs, &recv_offsets);
    if (!s.ok()) return s;
    const MPI_Datatype type = ElementDatatype(element_size);
    return MpiCall(MPI_Alltoallv(input, sends.data(), send_offsets.data(), type, output,
                                 recvs.data(), recv_offsets.data(), type, comm),
                   "MPI_Alltoallv");
  }

  Status ReduceScatter(int32_t set, int, void* buffer, const std::vector<int64_t>& counts,
                       void* output, tutti_dtype dtype, tutti_reduce_op op) override {
    MPI_Comm comm;
    MPI_Op mpi_op;
    std::vector<int> ints, offsets;
    Status s = Prepare(set, dtype, op, &comm, &mpi_op);
    if (s.ok()) s = MpiCounts(counts, &ints, &offsets);
    if (!s.ok()) return s;
    return MpiCall(MPI_Reduce_scatter(buffer, output, ints.data(), StorageDatatype(dtype), mpi_op,
                                      comm),
                   "MPI_Reduce_scatter");
  }

  Status SendRecv(int32_t set, int, int peer, const void* send, int64_t send_bytes, void* recv,
                  int64_t recv_bytes) override {
    MPI_Comm comm;
    Status s = Comm(set, &comm);
    // MPI counts are int: large messages go in chunks, matched on both sides because one
    // side's send is the other's receive.
    const int64_t kMaxChunk = int64_t(1) << 30;
    const char* out = static_cast<const char*>(send);
    char* in = static_cast<char*>(recv);
    auto chunk = [&](int64_t bytes, int64_t done) {
      return static_cast<int>(std::max<int64_t>(0, std::min(kMaxChunk, bytes - done)));
    };
    for (int64_t done = 0; s.ok() && done < std::max(send_bytes, recv_bytes); done += kMaxChunk) {
      const int send_chunk = chunk(send_bytes, done), recv_chunk = chunk(recv_bytes, done);
      s = MpiCall(MPI_Sendrecv(out + (send_chunk > 0 ? done : 0), send_chunk, MPI_BYTE, peer,
                               kSendRecvTag, in + (recv_chunk > 0 ? done : 0), recv_chunk,
                               MPI_BYTE, peer, kSendRecvTag, comm, MPI_STATUS_IGNORE),
                  "MPI_Sendrecv");
    }
    return s;
  }

  Status Barrier(int32_t set) override {
    MPI_Comm comm;
    Status s = Comm(set, &comm);
    if (!s.ok()) return s;
    MPI_Request request;
    s = MpiCall(MPI_Ibarrier(comm, &request), "MPI_Ibarrier");
    if (s.ok()) s = Wait(&request, "barrier");
    return s;
  }

 private:
  static bool Finalized() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    return finalized != 0;
  }
  static Status FinalizedError() {
    return Status::Aborted(
        "MPI was finalized while tutti was running: call tutti's shutdown() before MPI_Finalize");
  }

  // The communicator of process set `set` (this rank is a member).
  Status Comm(int32_t set, MPI_Comm* comm) {
    if (Finalized()) return FinalizedError();
    if (set == TUTTI_GLOBAL_PROCESS_SET) {
      *comm = world_;
      return Status::OK();
    }
    auto it = sets_.find(set);
    if (it == sets_.end()) {
      return Status::Internal("no MPI communicator for process set " + std::to_string(set));
    }
    *comm = it->second;
    return Status::OK();
  }

  Status Prepare(int32_t set, tutti_dtype dtype, tutti_reduce_op op, MPI_Comm* comm,
                 MPI_Op* mpi_op) {
    Status s = Comm(set, comm);
    if (!s.ok()) return s;
    *mpi_op = BuiltinOp(dtype, op);
    if (*mpi_op == MPI_OP_NULL) return UserOp(dtype, op, mpi_op);
    return Status::OK();
  }

  Status UserOp(tutti_dtype dtype, tutti_reduce_op op, MPI_Op* result) {
    auto key = std::make_pair(static_cast<int>(dtype), static_cast<int>(op));
    auto it = user_ops_.find(key);
    if (it == user_ops_.end()) {
      MPI_Op created;
      Status s = MpiCall(MPI_Op_create(UserFunction(dtype, op), /*commute=*/1, &created),
                         "MPI_Op_create");
      if (!s.ok()) return s;
      it = user_ops_.emplace(key, created).first;
    }
    *result = it->second;
    return Status::OK();
  }

  // Polls a nonblocking request: spins briefly (answers usually come within microseconds),
  // then sleeps between tests so idle ranks don't burn a core. Gives up after the timeout.
  Status Wait(MPI_Request* request, const char* what) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const auto spin_until = start + std::chrono::microseconds(50);
    const auto deadline = start + std::chrono::duration<double>(timeout_seconds_);
    auto nap = std::chrono::microseconds(20);
    while (true) {
      int done = 0;
      Status s = MpiCall(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (!s.ok() || done) return s;
      auto now = Clock::now();
      if (now > deadline) {
        // Collective requests cannot be cancelled; the communicator is unusable from here on.
        return Status::Aborted(std::string(what) + ": no answer from the other ranks within " +
                               std::to_string(static_cast<int>(timeout_seconds_)) +
                               " s (TUTTI_GLOO_TIMEOUT_SECONDS); a peer process is stuck or gone");
      }
      if (now > spin_until) {
        std::this_thread::sleep_for(nap);
        if (nap < std::chrono::microseconds(200)) nap *= 2;
      }
    }
  }

  static constexpr int kSendRecvTag = 7;  // the only point-to-point traffic on our communicators

  double timeout_seconds_;
  Topology topology_;
  MPI_Comm world_ = MPI_COMM_NULL;
  MPI_Comm local_ = MPI_COMM_NULL;
  MPI_Comm cross_ = MPI_COMM_NULL;
  std::map<std::pair<int, int>, MPI_Op> user_ops_;
  std::map<int32_t, MPI_Comm> sets_;  // process set id -> communicator (members only)
};

}  // namespace

Status CreateMpiTransport(const Config& config, std::unique_ptr<Transport>* transport) {
  std::string warning;
  Status s = EnsureMpiInitialized(&warning);
  if (!s.ok()) return s;
  if (!warning.empty()) LogWarning(warning);
  std::unique_ptr<MpiTransport> mpi(new MpiTransport(config.timeout_seconds));
  if (!(s = mpi->Connect()).ok()) return s;
  *transport = std::move(mpi);
  return Status::OK();
}

}  // namespace tutti
