"""Collectives that move data: allgather, broadcast and alltoall.

allgather and alltoall produce an output whose first dimension depends on the other ranks,
while an MXNet engine operation can neither create nor reshape an NDArray. So these calls
first exchange the sizes (a small collective through the same engine path, waited for
here), then create the output with its final shape and push the data collective, which
stays asynchronous and ordered with MXNet's other work on the tensor.
"""

import numbers

import mxnet as mx
import numpy
from tutti.common import core
from tutti.common.process_sets import global_process_set

from . import ops


def _exchange(collective, values, name, set_id, set_size, priority):
    """Runs an int64 allgather or int32 alltoall of `values` (len(values) per rank for the
    allgather, one per rank for the alltoall) and returns the received numpy array."""
    if collective == core.ALLGATHER:
        source = mx.nd.array(values, dtype="int64")
        output = mx.nd.empty((set_size * len(values),), dtype="int64")
        splits = None
    else:
        source = mx.nd.array(values, dtype="int32")
        output = mx.nd.empty((set_size,), dtype="int32")
        splits = [1] * set_size
    ops.push(collective, [source], [output], name, set_id, splits=splits, priority=priority)
    return output.asnumpy()  # raises MXNetError when the core failed


def _allgather(function, tensors, name, priority, process_set):
    for tensor in tensors:
        if tensor.ndim == 0:
            raise ValueError("tutti.mxnet.%s needs tensors with at least one dimension" % function)
    set_id, name = ops.prepare(function, process_set, name, "allgather")
    set_size = ops.set_size(set_id)
    rows = _exchange(core.ALLGATHER, [t.shape[0] for t in tensors], name + ".rows", set_id,
                     set_size, priority).reshape(set_size, len(tensors))
    outputs = [ops.empty_like(t, (int(rows[:, i].sum()),) + tuple(t.shape[1:]))
               for i, t in enumerate(tensors)]
    ops.push(core.ALLGATHER, tensors, outputs, name, set_id, priority=priority)
    return outputs


def allgather(tensor, name=None, priority=0, process_set=global_process_set):
    """Concatenates the tensors of every rank of the set along the first dimension (whose
    size may differ between ranks; the others must agree) and returns a new NDArray.

    Waits until every rank has announced its size, then returns; the data itself moves
    asynchronously."""
    ops.check_tensor(tensor, "allgather")
    return _allgather("allgather", [tensor], name, priority, process_set)[0]


def grouped_allgather(tensors, name=None, priority=0, process_set=global_process_set):
    """allgather of a list of NDArrays of one dtype as one request."""
    tensors = ops.check_group(tensors, "grouped_allgather")
    return _allgather("grouped_allgather", tensors, name, priority, process_set)


def _broadcast(function, tensor, in_place, root_rank, name, priority, process_set):
    ops.check_tensor(tensor, function)
    set_id, name = ops.prepare(function, process_set, name, "broadcast")
    set_size = ops.set_size(set_id)
    if isinstance(root_rank, bool) or not isinstance(root_rank, numbers.Integral) or not (
            0 <= root_rank < set_size):
        raise ValueError("root_rank must be a rank of the process set, between 0 and %d; got %r"
                         % (set_size - 1, root_rank))
    output = tensor if in_place else ops.empty_like(tensor, tensor.shape)
    ops.push(core.BROADCAST, [tensor], [output], name, set_id, root_rank=root_rank,
             priority=priority)
    return output


def broadcast(tensor, root_rank, name=None, priority=0, process_set=global_process_set):
    """Returns a new NDArray holding the tensor of `root_rank` (a rank within the set)."""
    return _broadcast("broadcast", tensor, False, root_rank, name, priority, process_set)


def broadcast_(tensor, root_rank, name=None, priority=0, process_set=global_process_set):
    """In-place broadcast: overwrites `tensor` with that of `root_rank`; returns it."""
    return _broadcast("broadcast_", tensor, True, root_rank, name, priority, process_set)


def _split_list(splits, rows, set_size):
    if splits is None:
        if rows % set_size:
            raise ValueError("alltoall without splits needs a first dimension divisible by the "
                             "set size %d, got %d rows" % (set_size, rows))
        return [rows // set_size] * set_size
    if isinstance(splits, mx.nd.NDArray):
        splits = splits.asnumpy()
    values = numpy.asarray(splits).reshape(-1)
    if values.dtype.kind not in "iu" and values.size:
        raise TypeError("splits must be integers, got %s" % values.dtype)
    values = [int(v) for v in values]
    if len(values) != set_size or min(values) < 0 or sum(values) != rows:
        raise ValueError("splits must hold %d non-negative counts summing to the %d rows of the "
                         "tensor, got %r" % (set_size, rows, values))
    return values


def alltoall(tensor, splits=None, name=None, priority=0, process_set=global_process_set):
    """Sends part j of `tensor` (split along the first dimension) to rank j of the set and
    concatenates what every rank sent here.

    splits: rows per rank (a list, numpy array or NDArray), or None for equal parts.
    Returns the output; when splits are given, like Horovod, (output, received_splits),
    received_splits an int32 NDArray of the rows that came from each rank. Waits until
    every rank has announced its splits, then returns; the data itself moves
    asynchronously."""
    ops.check_tensor(tensor, "alltoall")
    with_splits = splits is not None
    if tensor.ndim == 0:
        raise ValueError("tutti.mxnet.alltoall needs a tensor with at least one dimension")
    set_id, name = ops.prepare("alltoall", process_set, name, "alltoall")
    set_size = ops.set_size(set_id)
    sent = _split_list(splits, tensor.shape[0], set_size)
    received = _exchange(core.ALLTOALL, sent, name + ".splits", set_id, set_size, priority)
    output = ops.empty_like(tensor, (int(received.sum()),) + tuple(tensor.shape[1:]))
    ops.push(core.ALLTOALL, [tensor], [output], name, set_id, splits=sent, priority=priority)
    received_splits = mx.nd.array(received, dtype="int32")
    if isinstance(tensor, mx.np.ndarray):
        received_splits = received_splits.as_np_ndarray()
    return (output, received_splits) if with_splits else output
