// MPI controller: a private duplicate of MPI_COMM_WORLD, local/cross communicators from the
// shared-memory split, negotiation with nonblocking collectives polled by a waiter that sleeps
// (Open MPI's blocking calls spin a core while waiting for idle peers), and MPI_Allreduce for
// data (user-defined ops where MPI has no matching built-in).
// Only the MPI C API: the C++ bindings would need libmpi_cxx (gone in Open MPI 5).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <map>
#include <thread>
#include <utility>

#include "controller.h"
#include "dtype.h"
#include "log.h"
#include "mpi_runtime.h"
#include "reduce_kernels.h"

namespace tutti {
namespace {

template <tutti_dtype D, tutti_reduce_op OP>
void MpiUserReduce(void* in, void* inout, int* len, MPI_Datatype*) {
  using Storage = typename DtypeInfo<D>::Storage;
  ReduceTyped<D, OP>(static_cast<Storage*>(inout), static_cast<const Storage*>(in),
                     static_cast<size_t>(*len));
}

MPI_Datatype StorageDatatype(tutti_dtype dtype) {
  switch (dtype) {
    case TUTTI_UINT8: return MPI_UINT8_T;
    case TUTTI_INT8: return MPI_INT8_T;
    case TUTTI_UINT16: return MPI_UINT16_T;
    case TUTTI_INT16: return MPI_INT16_T;
    case TUTTI_INT32: return MPI_INT32_T;
    case TUTTI_INT64: return MPI_INT64_T;
    case TUTTI_FLOAT16: return MPI_UINT16_T;
    case TUTTI_BFLOAT16: return MPI_UINT16_T;
    case TUTTI_FLOAT32: return MPI_FLOAT;
    case TUTTI_FLOAT64: return MPI_DOUBLE;
    case TUTTI_BOOL: return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

// The built-in MPI op that matches our semantics, or MPI_OP_NULL when a user op is needed
// (float16/bfloat16 arithmetic, NaN-propagating float MIN/MAX).
MPI_Op BuiltinOp(tutti_dtype dtype, tutti_reduce_op op) {
  if (dtype == TUTTI_FLOAT16 || dtype == TUTTI_BFLOAT16) return MPI_OP_NULL;
  if (dtype == TUTTI_BOOL) {
    return (op == TUTTI_REDUCE_SUM || op == TUTTI_REDUCE_MAX) ? MPI_LOR : MPI_LAND;
  }
  bool is_float = dtype == TUTTI_FLOAT32 || dtype == TUTTI_FLOAT64;
  switch (op) {
    case TUTTI_REDUCE_SUM: return MPI_SUM;
    case TUTTI_REDUCE_PRODUCT: return MPI_PROD;
    case TUTTI_REDUCE_MIN: return is_float ? MPI_OP_NULL : MPI_MIN;
    case TUTTI_REDUCE_MAX: return is_float ? MPI_OP_NULL : MPI_MAX;
    default: return MPI_OP_NULL;
  }
}

MPI_User_function* UserFunction(tutti_dtype dtype, tutti_reduce_op op) {
  MPI_User_function* fn = nullptr;
  DispatchDtype(dtype, [&](auto d) {
    DispatchReduceOp(op, [&](auto o) { fn = &MpiUserReduce<decltype(d)::value, decltype(o)::value>; });
  });
  return fn;
}

Status MpiCall(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status::OK();
  return Status::Internal(std::string(what) + " failed: " + MpiErrorString(rc));
}

class MpiController : public Controller {
 public:
  explicit MpiController(double timeout_seconds) : timeout_seconds_(timeout_seconds) {}

  ~MpiController() override {
    if (Finalized()) return;  // the application finalized MPI; its objects are gone
    for (auto& item : user_ops_) MPI_Op_free(&item.second);
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

  Status Allreduce(void* buffer, int64_t count, tutti_dtype dtype, tutti_reduce_op op) override {
    if (Finalized()) return FinalizedError();
    MPI_Datatype datatype = StorageDatatype(dtype);
    MPI_Op mpi_op = BuiltinOp(dtype, op);
    if (mpi_op == MPI_OP_NULL) {
      Status s = UserOp(dtype, op, &mpi_op);
      if (!s.ok()) return s;
    }
    // MPI counts are int: reduce very large buffers in chunks.
    const int64_t kMaxChunk = int64_t(1) << 30;
    char* bytes = static_cast<char*>(buffer);
    const size_t element = DtypeSize(dtype);
    for (int64_t done = 0; done < count; done += kMaxChunk) {
      int chunk = static_cast<int>(std::min(kMaxChunk, count - done));
      Status s = MpiCall(MPI_Allreduce(MPI_IN_PLACE, bytes + done * element, chunk, datatype,
                                       mpi_op, world_),
                         "MPI_Allreduce");
      if (!s.ok()) return s;
    }
    return Status::OK();
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

  double timeout_seconds_;
  Topology topology_;
  MPI_Comm world_ = MPI_COMM_NULL;
  MPI_Comm local_ = MPI_COMM_NULL;
  MPI_Comm cross_ = MPI_COMM_NULL;
  std::map<std::pair<int, int>, MPI_Op> user_ops_;
};

}  // namespace

Status CreateMpiController(const Config& config, std::unique_ptr<Controller>* controller) {
  std::string warning;
  Status s = EnsureMpiInitialized(&warning);
  if (!s.ok()) return s;
  if (!warning.empty()) LogWarning(warning);
  std::unique_ptr<MpiController> mpi(new MpiController(config.timeout_seconds));
  if (!(s = mpi->Connect()).ok()) return s;
  *controller = std::move(mpi);
  return Status::OK();
}

}  // namespace tutti
