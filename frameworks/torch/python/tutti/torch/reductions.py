"""Reducing collectives on torch tensors with Horovod's signatures: allreduce and
reducescatter, single and grouped, synchronous and asynchronous.

The asynchronous functions return a handle for poll() and synchronize(); the synchronous
ones are that pair and are differentiable (for Average and Sum).
"""

import torch
from tutti.common import adasum
from tutti.common.basics import Adasum, Average, ReduceOp, Sum, resolve_reduce_op
from tutti.common.core import Collective
from tutti.common.process_sets import global_process_set

from . import requests
from .compression import Compression
from .requests import run_blocking

_run_plain = requests.run_plain
_ALLREDUCE = Collective.ALLREDUCE


def _reduce_args(op, average, prescale_factor, postscale_factor):
    return (resolve_reduce_op(op, average), requests.scale(prescale_factor, "prescale_factor"),
            requests.scale(postscale_factor, "postscale_factor"))


def _set_size(process_set):
    return (process_set or global_process_set).size()


# ---- allreduce ----

def _copy_back(targets, staged):
    """In-place results go back where a tensor was staged (not contiguous, or requiring
    grad: contiguous() gave another tensor)."""
    for target, source in zip(targets, staged):
        if source is not target and target.data_ptr() != source.data_ptr():
            target.data.copy_(source)


def _first_result(results, extra):
    return results[0]


def _result_list(results, extra):
    return list(results)


def _allreduce_async(tensors, kind, name, op, prescale, postscale, process_set, in_place,
                     grouped):
    """Queues the allreduce of `tensors` (checked by the caller). Every gradient of
    DistributedOptimizer comes through here: it builds no more than the request needs."""
    if op == Adasum:
        adasum.check_ranks(op, process_set)
    sources = requests.data_list(tensors)
    if in_place:
        outputs = sources

        def finish(results, extra):
            _copy_back(tensors, sources)
            return list(tensors) if grouped else tensors[0]
    else:
        outputs = [torch.empty_like(s) for s in sources]
        finish = _result_list if grouped else _first_result
    return requests.submit(Collective.ALLREDUCE, kind, name, process_set, sources, finish,
                           outputs, op, prescale, postscale)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing `tensor` across the ranks of `process_set` into a new tensor;
    returns a handle for poll() and synchronize(), which returns the result.

    op: Average (default), Sum, Adasum, Min, Max or Product. prescale_factor multiplies the input
    before the reduction and postscale_factor the result after it. name identifies the
    request across ranks; without one, requests are matched by the order they are made in.
    The tensor must not be modified until the request is synchronized.
    """
    args = _reduce_args(op, average, prescale_factor, postscale_factor)
    return _allreduce_async([requests.check_tensor(tensor)], "allreduce", name, *args,
                            process_set, in_place=False, grouped=False)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Like allreduce_async, but the result replaces the contents of `tensor`;
    synchronize() returns `tensor`."""
    if average is None:
        handle = requests.submit_plain_in_place(Collective.ALLREDUCE, "allreduce", tensor,
                                                name, op, prescale_factor, postscale_factor,
                                                process_set)
        if handle is not None:
            return handle
    args = _reduce_args(op, average, prescale_factor, postscale_factor)
    return _allreduce_async([requests.check_tensor(tensor)], "allreduce", name, *args,
                            process_set, in_place=True, grouped=False)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts one allreduce of a list of tensors (of one dtype), negotiated and completed
    together; synchronize() returns a list of new tensors."""
    args = _reduce_args(op, average, prescale_factor, postscale_factor)
    return _allreduce_async(requests.tensor_list(tensors, "grouped_allreduce"),
                            "grouped_allreduce", name, *args, process_set, in_place=False,
                            grouped=True)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """In-place grouped_allreduce_async(); synchronize() returns the given tensors."""
    args = _reduce_args(op, average, prescale_factor, postscale_factor)
    return _allreduce_async(requests.tensor_list(tensors, "grouped_allreduce_"),
                            "grouped_allreduce", name, *args, process_set, in_place=True,
                            grouped=True)


def _check_differentiable(op, what, reductions=(Average, Sum)):
    if op not in reductions:
        raise NotImplementedError("the gradient of %s is implemented for Average and Sum, "
                                  "not %s" % (what, ReduceOp(op).name))


class _Allreduce(torch.autograd.Function):
    """Allreduce as a differentiable function: for Sum, Average and (as in Horovod) Adasum,
    the gradient of every input is the same reduction of the output gradients."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale, process_set):
        ctx.args = (op, prescale, postscale, process_set)
        return run_blocking(_allreduce_async, [tensor], "allreduce", name, op, prescale, postscale,
                            process_set, False, False)

    @staticmethod
    def backward(ctx, grad_output):
        op, prescale, postscale, process_set = ctx.args
        _check_differentiable(op, "allreduce", (Average, Sum, Adasum))
        grad = run_blocking(_allreduce_async, [grad_output], "allreduce", None, op, prescale,
                            postscale, process_set, False, False)
        return grad, None, None, None, None, None


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale, postscale, process_set, *tensors):
        ctx.args = (op, prescale, postscale, process_set)
        return tuple(run_blocking(_allreduce_async, list(tensors), "grouped_allreduce", name, op,
                                  prescale, postscale, process_set, False, True))

    @staticmethod
    def backward(ctx, *grads):
        op, prescale, postscale, process_set = ctx.args
        _check_differentiable(op, "grouped_allreduce", (Average, Sum, Adasum))
        reduced = run_blocking(_allreduce_async, list(grads), "grouped_allreduce", None, op,
                               prescale, postscale, process_set, False, True)
        return (None,) * 5 + tuple(reduced)


def _apply_grouped(function, what, tensors, name, compression, reduce_args, process_set):
    """The grouped call `what`: the autograd `function` (taking name, op, prescale,
    postscale, process_set and the tensors) on the compressed tensors, as one request."""
    tensors = requests.tensor_list(tensors, what)
    requests.check_name(name)
    compression = compression or Compression.none
    compressed = [compression.compress(t) for t in tensors]
    outputs = function.apply(name, *reduce_args, process_set, *[c[0] for c in compressed])
    return [compression.decompress(o, c[1]) for o, c in zip(outputs, compressed)]


def allreduce(tensor, average=None, name=None, compression=None, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces `tensor` across the ranks of `process_set` and returns the result as a new
    tensor; `tensor` is left unchanged. Differentiable for Average and Sum.

    op: Average (default), Sum, Adasum, Min, Max or Product; average: deprecated, True means
    Average and False Sum. compression: e.g. Compression.fp16 to reduce floating-point
    tensors as float16. prescale_factor/postscale_factor multiply the input before and the
    result after the reduction. name identifies the request across ranks.
    """
    op, prescale, postscale = _reduce_args(op, average, prescale_factor, postscale_factor)
    requests.check_tensor(tensor)
    requests.check_name(name)
    compression = compression or Compression.none
    compressed, context = compression.compress(tensor)
    reduced = _Allreduce.apply(compressed, name, op, prescale, postscale, process_set)
    return compression.decompress(reduced, context)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """Reduces `tensor` across the ranks of `process_set` in place and returns it."""
    # allreduce_async_ and synchronize() in one, without a handle or a result closure
    # (this is the small-request path a training loop's metric averaging takes); with plain
    # arguments, in one native call.
    if average is None and _run_plain(_ALLREDUCE, "allreduce", tensor, name, op,
                                      prescale_factor, postscale_factor, process_set):
        return tensor
    op, prescale, postscale = _reduce_args(op, average, prescale_factor, postscale_factor)
    source = requests.contiguous(tensor)
    if op == Adasum:
        adasum.check_ranks(op, process_set)
    requests.run(Collective.ALLREDUCE, "allreduce", name, process_set, [source], [source],
                 op=op, prescale=prescale, postscale=postscale)
    _copy_back([tensor], [source])
    return tensor


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Reduces a list of tensors as one request; returns a list of new tensors.
    Differentiable for Average and Sum."""
    return _apply_grouped(_GroupedAllreduce, "grouped_allreduce", tensors, name, compression,
                          _reduce_args(op, average, prescale_factor, postscale_factor),
                          process_set)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors in place as one request; returns them."""
    return run_blocking(grouped_allreduce_async_, tensors, average, name, op, prescale_factor,
                        postscale_factor, process_set)


# ---- reducescatter ----

def _reducescatter_async(tensors, kind, name, op, prescale, postscale, process_set, grouped):
    sources = [requests.contiguous(t) for t in tensors]

    def finish(results, extra):
        return list(results) if grouped else results[0]

    return requests.submit(Collective.REDUCESCATTER, kind, name, process_set, sources, finish,
                           op=op, prescale=prescale, postscale=postscale)


def reducescatter_async(tensor, name=None, op=Average, prescale_factor=1.0,
                        postscale_factor=1.0, process_set=global_process_set):
    """Starts a reducescatter of `tensor`; synchronize() returns this rank's part."""
    args = _reduce_args(op, None, prescale_factor, postscale_factor)
    return _reducescatter_async([requests.check_tensor(tensor)], "reducescatter", name, *args,
                                process_set, False)


def grouped_reducescatter_async(tensors, name=None, op=Average, prescale_factor=1.0,
                                postscale_factor=1.0, process_set=global_process_set):
    """Starts one reducescatter of a list of tensors; synchronize() returns a list."""
    args = _reduce_args(op, None, prescale_factor, postscale_factor)
    return _reducescatter_async(requests.tensor_list(tensors, "grouped_reducescatter"),
                                "grouped_reducescatter", name, *args, process_set, True)


def _gather_gradients(grads, op, prescale, postscale, process_set):
    """Gradient of a reducescatter, as Horovod 0.28.1 defines it: every rank's output
    gradient, gathered, and for op=Sum multiplied by the set size (Average: unscaled)."""
    factor = float(_set_size(process_set)) if op == Sum else 1.0
    # Submitted here rather than through data_movement, which builds on this module.
    gathered = run_blocking(requests.submit, Collective.ALLGATHER, "grouped_allgather", None,
                            process_set, [requests.contiguous(g) for g in grads],
                            lambda results, extra: list(results))
    return [g * factor if factor != 1.0 else g for g in gathered]


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale, postscale, process_set, *tensors):
        ctx.args = (op, prescale, postscale, process_set)
        return tuple(run_blocking(_reducescatter_async, list(tensors), "grouped_reducescatter" if
                                  len(tensors) > 1 else "reducescatter", name, op, prescale,
                                  postscale, process_set, True))

    @staticmethod
    def backward(ctx, *grads):
        op, prescale, postscale, process_set = ctx.args
        _check_differentiable(op, "reducescatter")
        return (None,) * 5 + tuple(_gather_gradients(grads, op, prescale, postscale,
                                                     process_set))


def reducescatter(tensor, name=None, compression=None, op=Average, prescale_factor=1.0,
                  postscale_factor=1.0, process_set=global_process_set):
    """Reduces `tensor` across the ranks of `process_set` and returns this rank's part of
    the result along the first dimension: with n rows and k ranks, the first n % k ranks
    get n // k + 1 rows and the others n // k. op: Average (default) or Sum (also Min, Max,
    Product, not differentiable). Differentiable as in Horovod: the gradient is the
    allgather of the output gradients, times the set size for Sum."""
    op, prescale, postscale = _reduce_args(op, None, prescale_factor, postscale_factor)
    requests.check_tensor(tensor)
    requests.check_name(name)
    compression = compression or Compression.none
    compressed, context = compression.compress(tensor)
    (part,) = _Reducescatter.apply(name, op, prescale, postscale, process_set, compressed)
    return compression.decompress(part, context)


def grouped_reducescatter(tensors, name=None, compression=None, op=Average,
                          prescale_factor=1.0, postscale_factor=1.0,
                          process_set=global_process_set):
    """reducescatter() of a list of tensors as one request; returns a list of parts."""
    return _apply_grouped(_Reducescatter, "grouped_reducescatter", tensors, name, compression,
                          _reduce_args(op, None, prescale_factor, postscale_factor),
                          process_set)
