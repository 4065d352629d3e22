#include "requests/request_builder.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/adasum.h"
#include "base/dtype.h"
#include "kernels/reduce_kernels.h"

namespace tutti {
namespace {

// The name join requests are matched under: every rank's join is the same request.
const char* const kJoinName = "tutti.join";

std::vector<int64_t> Shape(const tutti_tensor& t) {
  return std::vector<int64_t>(t.shape, t.shape + t.ndim);
}

// "input", or "input 3" for a tensor of a grouped request (index >= 0).
std::string TensorLabel(const char* role, int index) {
  return index < 0 ? std::string(role) : std::string(role) + " " + std::to_string(index);
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

bool Reduces(Collective c) {
  return c == Collective::kAllreduce || c == Collective::kReducescatter;
}

bool HasOutputViews(Collective c) {
  return c == Collective::kAllreduce || c == Collective::kBroadcast;
}

bool Groupable(Collective c) {
  return c == Collective::kAllreduce || c == Collective::kAllgather ||
         c == Collective::kReducescatter;
}

Status CheckTensors(const tutti_request& r, Collective c, PendingOp* op) {
  const int n = r.num_tensors;
  if (c == Collective::kBarrier || c == Collective::kJoin) return Status::OK();
  if (n < 1) return Status::InvalidArgument("needs at least one tensor (num_tensors is " +
                                            std::to_string(n) + ")");
  if (n > 1 && !Groupable(c)) {
    return Status::InvalidArgument("takes exactly one tensor (num_tensors is " +
                                   std::to_string(n) + "); only allreduce, allgather and "
                                   "reducescatter can be grouped");
  }
  if (r.inputs == nullptr) return Status::InvalidArgument("inputs is NULL");
  if (HasOutputViews(c) && r.outputs == nullptr) return Status::InvalidArgument("outputs is NULL");
  if (!HasOutputViews(c) && r.allocate == nullptr) {
    return Status::InvalidArgument("the allocate callback is NULL");
  }
  op->tensors.reserve(n);
  op->meta.shapes.reserve(n);
  for (int i = 0; i < n; ++i) {
    // Labels are built only for an error: a grouped request checks every tensor.
    const int index = n > 1 ? i : -1;
    const tutti_tensor& in = r.inputs[i];
    Status s = CheckTensor("input", index, &in);
    if (!s.ok()) return s;
    if (in.dtype != r.inputs[0].dtype) {
      return Status::InvalidArgument(std::string("all tensors of a grouped request need one "
                                                 "dtype: input ") + std::to_string(i) + " is " +
                                     DtypeName(in.dtype) + ", input 0 is " +
                                     DtypeName(r.inputs[0].dtype));
    }
    if (!HasOutputViews(c) && in.ndim < 1) {
      return Status::InvalidArgument(TensorLabel("input", index) + " is a scalar; " +
                                     CollectiveName(c) + " needs at least one dimension");
    }
    TensorView view;
    view.input = in.data;
    view.shape.assign(in.shape, in.shape + in.ndim);
    if (HasOutputViews(c)) {
      const tutti_tensor& out = r.outputs[i];
      s = CheckTensor("output", index, &out);
      if (!s.ok()) return s;
      if (out.dtype != in.dtype) {
        return Status::InvalidArgument(TensorLabel("output", index) + " dtype " +
                                       DtypeName(out.dtype) + " differs from input dtype " +
                                       DtypeName(in.dtype));
      }
      if (out.ndim != in.ndim || !std::equal(in.shape, in.shape + in.ndim, out.shape)) {
        return Status::InvalidArgument(TensorLabel("output", index) + " shape " +
                                       ShapeString(Shape(out)) + " differs from input shape " +
                                       ShapeString(view.shape));
      }
      view.output = out.data;
    }
    op->meta.shapes.push_back(view.shape);
    op->tensors.push_back(std::move(view));
  }
  op->meta.dtype = r.inputs[0].dtype;
  return Status::OK();
}

Status CheckAdasum(Collective c, int set_size) {
  if (c != Collective::kAllreduce) {
    return Status::InvalidArgument("ADASUM is an allreduce operation; " +
                                   std::string(CollectiveName(c)) + " does not support it");
  }
  if (!adasum::IsPowerOfTwo(set_size)) {
    return Status::Unsupported("ADASUM needs a process set whose size is a power of two; this "
                               "one has " + std::to_string(set_size) + " ranks");
  }
  return Status::OK();
}

Status CheckSplits(const tutti_request& r, int set_size, PendingOp* op) {
  const int64_t rows = op->meta.shapes[0][0];
  if (r.splits == nullptr) {
    if (rows % set_size != 0) {
      return Status::InvalidArgument(
          "the first dimension " + std::to_string(rows) + " is not divisible by the process "
          "set size " + std::to_string(set_size) + "; pass splits to send unequal parts");
    }
    return Status::OK();
  }
  int64_t total = 0;
  for (int i = 0; i < set_size; ++i) {
    if (r.splits[i] < 0) {
      return Status::InvalidArgument("splits[" + std::to_string(i) + "] is negative (" +
                                     std::to_string(r.splits[i]) + ")");
    }
    total += r.splits[i];
    op->meta.splits.push_back(r.splits[i]);
  }
  if (total != rows) {
    return Status::InvalidArgument("splits sum to " + std::to_string(total) +
                                   " but the first dimension is " + std::to_string(rows));
  }
  return Status::OK();
}

// root_rank arrives as a global rank (Horovod's convention); from here on (negotiation, the
// wire, execution) the request carries the root's rank within its set.
Status SetRoot(const tutti_request& r, int set_size, const ProcessSetRegistry& sets,
               PendingOp* op) {
  const std::string root = "root_rank " + std::to_string(r.root_rank);
  if (r.process_set == TUTTI_GLOBAL_PROCESS_SET) {
    if (r.root_rank < 0 || r.root_rank >= set_size) {
      return Status::InvalidArgument(root + " is out of range for a process set of size " +
                                     std::to_string(set_size));
    }
    op->meta.root_rank = r.root_rank;
    return Status::OK();
  }
  // One read of the members, so a concurrent removal cannot split the lookup from the message.
  std::vector<int32_t> members;
  if (!sets.Members(r.process_set, &members)) {
    return Status::InvalidArgument("process set " + std::to_string(r.process_set) +
                                   " is unknown (it was removed or never added)");
  }
  auto pos = std::lower_bound(members.begin(), members.end(), r.root_rank);
  if (pos == members.end() || *pos != r.root_rank) {
    std::string list;
    for (size_t i = 0; i < members.size(); ++i) {
      list += (i ? ", " : "") + std::to_string(members[i]);
    }
    return Status::InvalidArgument(root + " is not a member of process set " +
                                   std::to_string(r.process_set) + " (ranks " + list + ")");
  }
  op->meta.root_rank = static_cast<int32_t>(pos - members.begin());
  return Status::OK();
}

Status Build(const tutti_request& r, int rank, const ProcessSetRegistry& sets, PendingOp* op) {
  const Collective c = static_cast<Collective>(r.collective);
  if (r.done == nullptr) return Status::InvalidArgument("the done callback is NULL");
  const int set_size = sets.Size(r.process_set);
  if (set_size < 0) {
    return Status::InvalidArgument("process set " + std::to_string(r.process_set) +
                                   " is unknown (it was removed or never added)");
  }
  if (sets.RankIn(r.process_set, rank) < 0) {
    return Status::InvalidArgument("this rank (" + std::to_string(rank) + ") is not in process "
                                   "set " + std::to_string(r.process_set));
  }
  if (c == Collective::kJoin && r.process_set != TUTTI_GLOBAL_PROCESS_SET) {
    return Status::Unsupported("join is supported on the global process set only");
  }
  op->meta.collective = c;
  op->meta.process_set = r.process_set;
  Status s = CheckTensors(r, c, op);
  if (!s.ok()) return s;
  if (Reduces(c)) {
    s = CheckReduction(op->meta.dtype, r.reduce_op, r.prescale, r.postscale);
    if (!s.ok()) return s;
    if (r.reduce_op == TUTTI_REDUCE_ADASUM) {
      s = CheckAdasum(c, set_size);
      if (!s.ok()) return s;
    }
    op->meta.reduce_op = r.reduce_op;
    op->meta.prescale = r.prescale;
    op->meta.postscale = r.postscale;
  }
  if (c == Collective::kBroadcast) {
    s = SetRoot(r, set_size, sets, op);
    if (!s.ok()) return s;
  }
  if (c == Collective::kAlltoall) {
    s = CheckSplits(r, set_size, op);
    if (!s.ok()) return s;
  }
  op->allocate = r.allocate;
  op->received_splits = c == Collective::kAlltoall ? r.received_splits : nullptr;
  op->result = c == Collective::kJoin ? r.result : nullptr;
  op->done = r.done;
  op->user_data = r.user_data;
  return Status::OK();
}

}  // namespace

Status CheckTensor(const char* role, int index, const tutti_tensor* t) {
  if (t == nullptr) return Status::InvalidArgument(TensorLabel(role, index) + " tensor is NULL");
  if (!IsValidDtype(t->dtype)) {
    return Status::InvalidArgument(TensorLabel(role, index) + " tensor has invalid dtype " +
                                   std::to_string(static_cast<int>(t->dtype)));
  }
  if (t->ndim < 0 || (t->ndim > 0 && t->shape == nullptr)) {
    return Status::InvalidArgument(TensorLabel(role, index) +
                                   " tensor has an invalid shape (ndim " +
                                   std::to_string(t->ndim) + ")");
  }
  int64_t count = 1;
  for (int32_t i = 0; i < t->ndim; ++i) {
    if (t->shape[i] < 0) {
      return Status::InvalidArgument(TensorLabel(role, index) +
                                     " tensor has a negative dimension");
    }
    count *= t->shape[i];
  }
  if (t->data == nullptr && count > 0) {
    return Status::InvalidArgument(TensorLabel(role, index) + " tensor has no data pointer");
  }
  return Status::OK();
}

Status BuildRequest(const tutti_request& request, int rank, const ProcessSetRegistry& sets,
                    PendingOp* op) {
  if (!IsPublicCollective(static_cast<int>(request.collective))) {
    return Status::InvalidArgument("unknown collective " +
                                   std::to_string(static_cast<int>(request.collective)));
  }
  const Collective c = static_cast<Collective>(request.collective);
  const bool join = c == Collective::kJoin;
  if (!join && (request.name == nullptr || request.name[0] == '\0')) {
    return Status::InvalidArgument(std::string(CollectiveName(c)) +
                                   " needs a non-empty request name");
  }
  op->meta.name = join ? kJoinName : request.name;
  Status s = Build(request, rank, sets, op);
  if (s.ok()) return s;
  return Status(s.code(), std::string(CollectiveName(c)) + " of '" + op->meta.name + "': " +
                              s.message());
}

}  // namespace tutti
