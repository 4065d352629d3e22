"""Collectives that move data without reducing it: allgather, broadcast and alltoall."""

import numpy

from tutti.common import core, process_sets, requests
from tutti.common.basics import Sum
from tutti.common.exceptions import InvalidArgumentError
from tutti.common.process_sets import global_process_set

_run_plain = requests.run_plain
_allgather_plain = requests.allgather_plain
_BROADCAST = core.BROADCAST


def _allocated_outputs(count, grouped):
    def finish(allocated):
        outputs = [allocated[i] for i in range(count)]
        return outputs if grouped else outputs[0]

    return finish


# ---- allgather ----

def allgather_async(array, name=None, process_set=global_process_set):
    """Starts an allgather of `array`; the handle's result is the concatenation."""
    source = requests.source_array(array)
    return requests.submit(core.ALLGATHER, "allgather", name, process_set, [source],
                           _allocated_outputs(1, False), allocates=True)


def allgather(array, name=None, process_set=global_process_set):
    """Concatenates the arrays of every rank of `process_set` along the first dimension,
    in rank order. The first dimension may differ between ranks; the others must agree."""
    # With plain arguments, in one native call (requests.allgather_plain).
    gathered = _allgather_plain(array, name, process_set)
    if gathered is not None:
        return gathered
    return requests.run_blocking(allgather_async, array, name, process_set)


def grouped_allgather_async(arrays, name=None, process_set=global_process_set):
    """Starts one allgather of several arrays; the handle's result is a list."""
    sources = [requests.source_array(a) for a in requests.group(arrays, "grouped_allgather")]
    return requests.submit(core.ALLGATHER, "grouped_allgather", name, process_set, sources,
                           _allocated_outputs(len(sources), True), allocates=True)


def grouped_allgather(arrays, name=None, process_set=global_process_set):
    """Allgathers a list of arrays as one request; returns a list of arrays."""
    return requests.run_blocking(grouped_allgather_async, arrays, name, process_set)


# ---- broadcast ----

def _broadcast_async(source, output, root_rank, name, process_set):
    root = requests.rank_argument(root_rank, "root_rank")
    return requests.submit(core.BROADCAST, "broadcast", name, process_set, [source],
                           lambda allocated: output, outputs=[output], root_rank=root)


def broadcast_async(array, root_rank, name=None, process_set=global_process_set):
    """Starts a broadcast into a new array; returns a handle for synchronize()."""
    source = requests.source_array(array)
    return _broadcast_async(source, numpy.empty_like(source, order="C"), root_rank, name,
                            process_set)


def broadcast_async_(array, root_rank, name=None, process_set=global_process_set):
    """Starts an in-place broadcast into the C-contiguous numpy array `array`."""
    requests.check_in_place(array)
    return _broadcast_async(array, array, root_rank, name, process_set)


def broadcast(array, root_rank, name=None, process_set=global_process_set):
    """Returns a copy of the array of global rank `root_rank` (a member of `process_set`, as
    in Horovod) on every rank of the set. Every rank passes an array of the same shape and dtype."""
    return requests.run_blocking(broadcast_async, array, root_rank, name, process_set)


def broadcast_(array, root_rank, name=None, process_set=global_process_set):
    """Like broadcast(), but writes into `array` and returns it."""
    # With plain arguments, in one native call (requests.run_plain), as allreduce_.
    if _run_plain(_BROADCAST, array, name, Sum, 1.0, 1.0, process_set, root_rank):
        return array
    return requests.run_blocking(broadcast_async_, array, root_rank, name, process_set)


# ---- alltoall ----

def _splits_array(splits, set_size):
    if splits is None:
        return None
    values = numpy.asarray(splits)
    if values.ndim != 1 or values.shape[0] != set_size:
        raise InvalidArgumentError(
            "alltoall splits must list one row count per rank of the process set (%d "
            "entries), got %r" % (set_size, splits))
    if values.size and not numpy.issubdtype(values.dtype, numpy.integer):
        raise InvalidArgumentError("alltoall splits must be integers, got %r" % (splits,))
    limit = numpy.iinfo(numpy.int32)
    if values.size and (values.min() < limit.min or values.max() > limit.max):
        raise InvalidArgumentError("alltoall splits must fit in 32 bits, got %r" % (splits,))
    return numpy.ascontiguousarray(values, dtype=numpy.int32)


def alltoall_async(array, splits=None, name=None, process_set=global_process_set):
    """Starts an alltoall; the handle's result is (output, received_splits)."""
    source = requests.source_array(array)
    set_size = process_sets.set_size(process_sets.request_id(process_set))
    split_counts = _splits_array(splits, set_size)
    received = requests.int32_buffer(set_size)

    def finish(allocated):
        return allocated[0], received[:set_size].copy()

    return requests.submit(core.ALLTOALL, "alltoall", name, process_set, [source], finish,
                           allocates=True, splits=split_counts, received_splits=received)


def alltoall(array, splits=None, name=None, process_set=global_process_set):
    """Sends part j of `array` (along the first dimension) to rank j of `process_set` and
    returns (output, received_splits): the parts every rank sent here, concatenated in rank
    order, and how many rows came from each rank.

    splits: the number of rows for each rank of the set; None splits the first dimension
    into equal parts (it must then divide by the set's size)."""
    return requests.run_blocking(alltoall_async, array, splits, name, process_set)
