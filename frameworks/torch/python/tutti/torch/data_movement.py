"""Collectives that move tensors without reducing them: allgather, broadcast and alltoall,
synchronous (differentiable) and asynchronous, with Horovod's signatures."""

import torch
from tutti.common import basics
from tutti.common.basics import Average, Sum
from tutti.common.core import Collective
from tutti.common.process_sets import even_splits, global_process_set

from . import requests
from .reductions import _allreduce_async
from .requests import run_blocking, synchronize

_run_plain = requests.run_plain
_allgather_plain = requests.allgather_plain
_BROADCAST = Collective.BROADCAST

# ---- allgather ----


def _allgather_async(tensors, kind, name, process_set, grouped):
    sources = [requests.contiguous(t) for t in tensors]

    def finish(results, extra):
        return list(results) if grouped else results[0]

    return requests.submit(Collective.ALLGATHER, kind, name, process_set, sources, finish)


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts an allgather of `tensor`; synchronize() returns the concatenation."""
    return _allgather_async([requests.check_tensor(tensor)], "allgather", name, process_set,
                            False)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Starts one allgather of a list of tensors; synchronize() returns a list."""
    return _allgather_async(requests.tensor_list(tensors, "grouped_allgather"),
                            "grouped_allgather", name, process_set, True)


def _own_rows(grads, rows, process_set):
    """The gradient of an allgather for this rank: the average over the ranks of the
    output gradients, restricted to the rows this rank contributed."""
    reduced = run_blocking(_allreduce_async, list(grads), "grouped_allreduce", None, Average, 1.0,
                           1.0, process_set, False, True)
    counts = run_blocking(_allgather_async, [torch.tensor(rows, dtype=torch.int64)], "allgather",
                          None, process_set, False)
    counts = counts.view(-1, len(rows))
    rank = (process_set or global_process_set).rank()
    offsets = counts[:rank].sum(dim=0).tolist()
    return [g.narrow(0, offset, n) for g, offset, n in zip(reduced, offsets, rows)]


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.process_set = process_set
        ctx.rows = [t.shape[0] if t.dim() > 0 else 1 for t in tensors]
        kind = "grouped_allgather" if len(tensors) > 1 else "allgather"
        return tuple(run_blocking(_allgather_async, list(tensors), kind, name, process_set, True))

    @staticmethod
    def backward(ctx, *grads):
        return (None, None) + tuple(_own_rows(grads, ctx.rows, ctx.process_set))


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates the tensors of every rank of `process_set` along the first dimension,
    in rank order. The first dimension may differ between ranks; the others and the dtype
    must agree. Differentiable: the gradient is this rank's rows of the averaged output
    gradient."""
    # With plain arguments and nothing to differentiate, in one native call.
    gathered = _allgather_plain(tensor, name, process_set)
    if gathered is not None:
        return gathered
    requests.check_tensor(tensor)
    requests.check_name(name)
    if not (tensor.requires_grad and torch.is_grad_enabled()):
        # Nothing to differentiate: the same request without autograd's Function, which
        # costs a small call several microseconds.
        return run_blocking(_allgather_async, [tensor], "allgather", name, process_set, False)
    (gathered,) = _Allgather.apply(name, process_set, tensor)
    return gathered


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """allgather() of a list of tensors as one request; returns a list."""
    tensors = requests.tensor_list(tensors, "grouped_allgather")
    requests.check_name(name)
    return list(_Allgather.apply(name, process_set, *tensors))


# ---- broadcast ----


def _broadcast_async(tensor, root_rank, name, process_set, in_place):
    root = requests.integer(root_rank, "root_rank")
    source = requests.contiguous(tensor)
    output = source if in_place else torch.empty_like(source)

    def finish(results, extra):
        if in_place:
            if tensor.data_ptr() != source.data_ptr():
                tensor.data.copy_(source)
            return tensor
        return output

    return requests.submit(Collective.BROADCAST, "broadcast", name, process_set, [source],
                           finish, outputs=[output], root_rank=root)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts a broadcast of rank `root_rank`'s tensor into a new tensor."""
    return _broadcast_async(requests.check_tensor(tensor), root_rank, name, process_set, False)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts a broadcast into `tensor` itself; synchronize() returns `tensor`."""
    return _broadcast_async(requests.check_tensor(tensor), root_rank, name, process_set, True)


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return run_blocking(_broadcast_async, tensor, root_rank, name, process_set, False)

    @staticmethod
    def backward(ctx, grad_output):
        grad = run_blocking(_allreduce_async, [grad_output], "allreduce", None, Average, 1.0, 1.0,
                            ctx.process_set, False, False)
        if basics.rank() != ctx.root_rank:  # root_rank is a global rank
            grad = torch.zeros_like(grad)
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns a copy of the tensor of global rank `root_rank` (a member of `process_set`,
    as in Horovod) on every rank of the set; all pass tensors of the same shape and dtype. Differentiable:
    the root receives the average of every rank's output gradient, the others zeros."""
    requests.check_tensor(tensor)
    requests.check_name(name)
    root_rank = requests.integer(root_rank, "root_rank")
    if not (tensor.requires_grad and torch.is_grad_enabled()):
        # Nothing to differentiate: the same request without autograd's Function.
        return run_blocking(_broadcast_async, tensor, root_rank, name, process_set, False)
    return _Broadcast.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites `tensor` with rank `root_rank`'s tensor and returns it."""
    # With plain arguments, in one native call (requests.run_plain), as allreduce_.
    if _run_plain(_BROADCAST, "broadcast", tensor, name, None, 1.0, 1.0, process_set,
                  root_rank):
        return tensor
    return run_blocking(broadcast_async_, tensor, root_rank, name, process_set)


# ---- sparse allreduce ----


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Starts reducing the sparse COO tensor `tensor` (Horovod's sparse_allreduce_async):
    its indices and values are allgathered. Returns a handle to pass to synchronize() (or
    to call), which gives the sparse, uncoalesced sum over the ranks of `process_set`,
    divided by the set size for op=Average."""
    from tutti.common.basics import resolve_reduce_op

    op = resolve_reduce_op(op)
    if op not in (Average, Sum):
        raise ValueError("sparse_allreduce_async supports op=Average or op=Sum, not %s"
                         % op.name)
    if not isinstance(tensor, torch.Tensor) or not tensor.is_sparse:
        raise TypeError("sparse_allreduce_async needs a sparse COO tensor, got %s"
                        % (tensor.layout if isinstance(tensor, torch.Tensor)
                           else type(tensor).__name__))
    grad = tensor.coalesce()
    indices = allgather_async(grad.indices().t().contiguous(), name="%s.indices" % name,
                              process_set=process_set)
    values = allgather_async(grad.values(), name="%s.values" % name, process_set=process_set)

    def handle():
        gathered_values = synchronize(values)
        gathered_indices = synchronize(indices)
        if op == Average:
            gathered_values = gathered_values / (process_set or global_process_set).size()
        return torch.sparse_coo_tensor(gathered_indices.t(), gathered_values, grad.shape,
                                       check_invariants=False)

    return handle


# ---- alltoall ----


def _splits_list(tensor, splits, process_set):
    size = (process_set or global_process_set).size()
    if splits is None:
        rows = tensor.shape[0] if tensor.dim() > 0 else 1
        return even_splits(rows, size)
    if isinstance(splits, torch.Tensor):
        if splits.dim() != 1 or splits.dtype == torch.bool or splits.is_complex():
            raise TypeError("alltoall splits must be a 1-D tensor or a list of numbers, got "
                            "%s%s" % (splits.dtype, tuple(splits.shape)))
        splits = splits.tolist()
    # Horovod converts splits to int32 (float splits included, truncated).
    values = []
    for s in splits:
        if isinstance(s, bool) or not isinstance(s, (int, float)):
            raise TypeError("each alltoall split must be a number, got %r" % (s,))
        values.append(int(s))
    if len(values) != size:
        from tutti.common.exceptions import InvalidArgumentError
        raise InvalidArgumentError(
            "alltoall splits must list one row count per rank of the process set (%d "
            "entries), got %r" % (size, values))
    return values


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts an alltoall; synchronize() returns (output, received_splits), as Horovod's.
    received_splits has the dtype of a splits tensor, int32 otherwise."""
    requests.check_tensor(tensor)
    split_counts = _splits_list(tensor, splits, process_set)
    received_dtype = splits.dtype if isinstance(splits, torch.Tensor) else torch.int32
    source = requests.contiguous(tensor)

    def finish(results, extra):
        return results[0], torch.tensor(extra, dtype=received_dtype)

    return requests.submit(Collective.ALLTOALL, "alltoall", name, process_set, [source],
                           finish, splits=split_counts)


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        ctx.process_set = process_set
        output, received = run_blocking(alltoall_async, tensor, splits, name, process_set)
        ctx.received = received
        if splits is None:
            return output
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *unused):
        grad, _ = run_blocking(alltoall_async, grad_output, ctx.received.tolist(), None,
                               ctx.process_set)
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends part j of `tensor` (along the first dimension) to rank j of `process_set` and
    returns the parts every rank sent here, concatenated in rank order. With `splits`, as in
    Horovod, returns (output, received_splits): also how many rows came from each rank.

    splits: the number of rows for each rank of the set (list or 1-D tensor; floats are
    truncated); None splits the first dimension as evenly as possible, the first ranks
    getting one row more when the set size does not divide it. Differentiable: the
    gradient goes back the way the data came."""
    requests.check_tensor(tensor)
    requests.check_name(name)
    return _Alltoall.apply(tensor, splits, name, process_set)
