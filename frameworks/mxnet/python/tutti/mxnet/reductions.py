"""Reductions of NDArrays: allreduce and reducescatter, single and grouped."""

from tutti.common import adasum, core
from tutti.common.basics import resolve_reduce_op
from tutti.common.process_sets import (global_process_set, reducescatter_rows, set_rank,
                                       set_size)

from . import requests


def _allreduce(function, tensors, in_place, average, name, priority, prescale_factor,
               postscale_factor, op, process_set):
    op = resolve_reduce_op(op, average)
    adasum.check_ranks(op, process_set)
    set_id, name = requests.prepare(function, process_set, name, "allreduce")
    outputs = tensors if in_place else [requests.empty_like(t, t.shape) for t in tensors]
    requests.push(core.ALLREDUCE, tensors, outputs, name, set_id, op, prescale_factor,
             postscale_factor, priority=priority)
    return outputs


def allreduce(tensor, average=None, name=None, priority=0, prescale_factor=1.0,
              postscale_factor=1.0, op=None, process_set=global_process_set):
    """Reduces `tensor` over the ranks of `process_set` and returns the result as a new
    NDArray.

    Every rank must call it with a tensor of the same shape and dtype; calls are matched
    across ranks by `name` (unnamed calls by the order in which they are made).

    op: hvd.Average (default), hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max or hvd.Product.
    average: deprecated; True means Average and False means Sum.
    priority: MXNet engine priority; higher values run earlier.
    prescale_factor / postscale_factor: multiply the input before and the result after
    the reduction.
    """
    requests.check_tensor(tensor, "allreduce")
    return _allreduce("allreduce", [tensor], False, average, name, priority, prescale_factor,
                      postscale_factor, op, process_set)[0]


def allreduce_(tensor, average=None, name=None, priority=0, prescale_factor=1.0,
               postscale_factor=1.0, op=None, process_set=global_process_set):
    """In-place allreduce: like allreduce(), but writes the result into `tensor` and
    returns it."""
    requests.check_tensor(tensor, "allreduce_")
    return _allreduce("allreduce_", [tensor], True, average, name, priority, prescale_factor,
                      postscale_factor, op, process_set)[0]


def grouped_allreduce(tensors, average=None, name=None, priority=0, prescale_factor=1.0,
                      postscale_factor=1.0, op=None, process_set=global_process_set):
    """Allreduces a list of NDArrays of one dtype as one request; returns new NDArrays."""
    tensors = requests.check_group(tensors, "grouped_allreduce")
    return _allreduce("grouped_allreduce", tensors, False, average, name, priority,
                      prescale_factor, postscale_factor, op, process_set)


def grouped_allreduce_(tensors, average=None, name=None, priority=0, prescale_factor=1.0,
                       postscale_factor=1.0, op=None, process_set=global_process_set):
    """In-place grouped_allreduce: the results are written into `tensors`, returned."""
    tensors = requests.check_group(tensors, "grouped_allreduce_")
    return _allreduce("grouped_allreduce_", tensors, True, average, name, priority,
                      prescale_factor, postscale_factor, op, process_set)


def _reducescatter(function, tensors, op, name, priority, prescale_factor, postscale_factor,
                   process_set):
    op = resolve_reduce_op(op)
    set_id, name = requests.prepare(function, process_set, name, "reducescatter")
    rank, size = set_rank(set_id), set_size(set_id)
    # The output's shape follows from the input's, so it is created before the push.
    for tensor in tensors:
        if tensor.ndim == 0:
            raise ValueError("reducescatter needs a tensor with at least one dimension")
    outputs = [requests.empty_like(t, (reducescatter_rows(t.shape[0], rank, size),)
                                   + tuple(t.shape[1:])) for t in tensors]
    requests.push(core.REDUCESCATTER, tensors, outputs, name, set_id, op, prescale_factor,
             postscale_factor, priority=priority)
    return outputs


def reducescatter(tensor, op=None, name=None, priority=0, prescale_factor=1.0,
                  postscale_factor=1.0, process_set=global_process_set):
    """Reduces `tensor` over the set, then keeps this rank's part of the first dimension
    (rows // size rows; the first rows % size ranks get one more). op defaults to Average."""
    requests.check_tensor(tensor, "reducescatter")
    return _reducescatter("reducescatter", [tensor], op, name, priority, prescale_factor,
                          postscale_factor, process_set)[0]


def grouped_reducescatter(tensors, op=None, name=None, priority=0, prescale_factor=1.0,
                          postscale_factor=1.0, process_set=global_process_set):
    """reducescatter of a list of NDArrays of one dtype as one request."""
    tensors = requests.check_group(tensors, "grouped_reducescatter")
    return _reducescatter("grouped_reducescatter", tensors, op, name, priority,
                          prescale_factor, postscale_factor, process_set)
