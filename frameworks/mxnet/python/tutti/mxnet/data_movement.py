"""Collectives that move data: allgather, broadcast and alltoall.

allgather and alltoall produce an output whose first dimension depends on the other ranks,
while an MXNet engine operation can neither create nor reshape an NDArray. So these calls
first exchange the sizes (a small collective through the same engine path, waited for
here), then create the output with its final shape and push the data collective, which
stays asynchronous and ordered with MXNet's other work on the tensor. allgather exchanges
every rank's whole shape and dtype, so that ranks that disagree fail at the call with
MXNetError, as in Horovod (whose allgather waits for its result).
"""

import numbers

import mxnet as mx
import numpy
from tutti.common import basics, core, process_sets
from tutti.common.process_sets import even_splits, global_process_set

from . import requests

# An allgather describes each tensor to the other ranks as [dtype, ndim, dim 0, ..., dim
# MAX_NDIM-1] (unused dimensions -1), one fixed-length int64 record per tensor.
MAX_NDIM = 32
_RECORD = 2 + MAX_NDIM


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
    requests.push(collective, [source], [output], name, set_id, splits=splits, priority=priority)
    return output.asnumpy()  # raises MXNetError when the core failed


def _describe(tensor, function):
    if tensor.ndim == 0:
        raise ValueError("tutti.mxnet.%s needs tensors with at least one dimension" % function)
    if tensor.ndim > MAX_NDIM:
        raise ValueError("tutti.mxnet.%s supports at most %d dimensions, got %d"
                         % (function, MAX_NDIM, tensor.ndim))
    dims = list(tensor.shape) + [-1] * (MAX_NDIM - tensor.ndim)
    return [basics.DTYPE[requests.dtype_name(tensor)], tensor.ndim] + dims


def _shape_text(record):
    dtype = {code: name for name, code in basics.DTYPE.items()}.get(int(record[0]), "?")
    return "%s %s" % (tuple(int(d) for d in record[2:2 + int(record[1])]), dtype)


def _check_agreement(records, name, set_id):
    """MXNetError naming the ranks when their tensors differ beyond the first dimension.

    records[r, i] describes tensor i of set rank r; every rank sees the same records, so
    every rank raises the same error and none pushes the data collective."""
    for i in range(records.shape[1]):
        def signature(rank):
            record = records[rank, i]
            return (int(record[0]), int(record[1])) + tuple(int(d) for d in record[3:])
        for rank in range(1, records.shape[0]):
            if signature(rank) != signature(0):
                label = name if records.shape[1] == 1 else "%s (tensor %d)" % (name, i)
                raise mx.base.MXNetError(
                    "Mismatched allgather tensor shapes or types for %s: set rank 0 has %s, "
                    "set rank %d has %s; all but the first dimension and the dtype must agree"
                    " (process set %d)" % (label, _shape_text(records[0, i]), rank,
                                           _shape_text(records[rank, i]), set_id))


def _allgather(function, tensors, name, priority, process_set):
    descriptions = [_describe(t, function) for t in tensors]
    set_id, name = requests.prepare(function, process_set, name, "allgather")
    set_size = process_sets.set_size(set_id)
    records = _exchange(core.ALLGATHER, sum(descriptions, []), name + ".shapes", set_id,
                        set_size, priority).reshape(set_size, len(tensors), _RECORD)
    _check_agreement(records, name, set_id)
    outputs = [requests.empty_like(t, (int(records[:, i, 2].sum()),) + tuple(t.shape[1:]))
               for i, t in enumerate(tensors)]
    requests.push(core.ALLGATHER, tensors, outputs, name, set_id, priority=priority)
    return outputs


def allgather(tensor, name=None, priority=0, process_set=global_process_set):
    """Concatenates the tensors of every rank of the set along the first dimension (whose
    size may differ between ranks; the others must agree) and returns a new NDArray.

    Waits until every rank has announced its shape, then returns; the data itself moves
    asynchronously. Raises MXNetError when the ranks' other dimensions or dtypes differ."""
    requests.check_tensor(tensor, "allgather")
    return _allgather("allgather", [tensor], name, priority, process_set)[0]


def grouped_allgather(tensors, name=None, priority=0, process_set=global_process_set):
    """allgather of a list of NDArrays of one dtype as one request."""
    tensors = requests.check_group(tensors, "grouped_allgather")
    return _allgather("grouped_allgather", tensors, name, priority, process_set)


def _broadcast(function, tensor, in_place, root_rank, name, priority, process_set):
    requests.check_tensor(tensor, function)
    set_id, name = requests.prepare(function, process_set, name, "broadcast")
    # Whether the root is a member of the set is the core's check (one message for every
    # frontend); as in Horovod it fails when the result is read, with MXNetError.
    if isinstance(root_rank, bool) or not isinstance(root_rank, numbers.Integral):
        raise ValueError("root_rank must be an integer, got %r" % (root_rank,))
    output = tensor if in_place else requests.empty_like(tensor, tensor.shape)
    requests.push(core.BROADCAST, [tensor], [output], name, set_id, root_rank=root_rank,
             priority=priority)
    return output


def broadcast(tensor, root_rank, name=None, priority=0, process_set=global_process_set):
    """Returns a new NDArray holding the tensor of global rank `root_rank` (a member of the
    set, as in Horovod)."""
    return _broadcast("broadcast", tensor, False, root_rank, name, priority, process_set)


def broadcast_(tensor, root_rank, name=None, priority=0, process_set=global_process_set):
    """In-place broadcast: overwrites `tensor` with that of `root_rank`; returns it."""
    return _broadcast("broadcast_", tensor, True, root_rank, name, priority, process_set)


def _split_list(splits, rows, set_size):
    if splits is None:
        return even_splits(rows, set_size)
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

    splits: rows per rank (a list, numpy array or NDArray), or None for parts as equal as
    possible (rank j gets rows // size rows, plus one when j < rows % size).
    Returns the output; when splits are given, like Horovod, (output, received_splits),
    received_splits an int32 NDArray of the rows that came from each rank. Waits until
    every rank has announced its splits, then returns; the data itself moves
    asynchronously."""
    requests.check_tensor(tensor, "alltoall")
    with_splits = splits is not None
    if tensor.ndim == 0:
        raise ValueError("tutti.mxnet.alltoall needs a tensor with at least one dimension")
    set_id, name = requests.prepare("alltoall", process_set, name, "alltoall")
    set_size = process_sets.set_size(set_id)
    sent = _split_list(splits, tensor.shape[0], set_size)
    received = _exchange(core.ALLTOALL, sent, name + ".splits", set_id, set_size, priority)
    output = requests.empty_like(tensor, (int(received.sum()),) + tuple(tensor.shape[1:]))
    requests.push(core.ALLTOALL, [tensor], [output], name, set_id, splits=sent, priority=priority)
    received_splits = mx.nd.array(received, dtype="int32")
    if isinstance(tensor, mx.np.ndarray):
        received_splits = received_splits.as_np_ndarray()
    return (output, received_splits) if with_splits else output
