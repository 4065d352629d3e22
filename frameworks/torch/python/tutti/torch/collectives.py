"""Allreduce for torch tensors, synchronous and asynchronous, with Horovod's signatures.

Every collective is asynchronous underneath: `allreduce_async` hands the tensor to the
core and returns a handle; `synchronize(handle)` waits for it and returns the result. The
synchronous functions are exactly that pair. Errors reported by the core are raised as the
matching tutti.common exception (all are RuntimeError subclasses) with the core's message.
"""

import numbers

import torch
from tutti.common.basics import Average, ReduceOp, Sum, resolve_reduce_op
from tutti.common.exceptions import error_for_status

from ._native import ops
from .compression import Compression

# synchronize() waits in slices this long, so that Ctrl-C is noticed between them.
_WAIT_SLICE_SECONDS = 0.5

# handle -> output tensor of a request not synchronized yet.
_outputs = {}


def _call(op, *args):
    """Runs a native op; a failure it reports becomes the tutti exception for its status."""
    try:
        return op(*args)
    except RuntimeError as error:
        status = ops.take_error_status()
        if not status:
            raise  # not raised by tutti (e.g. the dispatcher rejected the arguments)
        raise error_for_status(status, str(error)) from None


def _request_args(tensor, name, op, prescale_factor, postscale_factor):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("expected a torch.Tensor, got %s" % type(tensor).__name__)
    if name is not None and not isinstance(name, str):
        raise TypeError("name must be a str or None, got %s" % type(name).__name__)
    factors = {"prescale_factor": prescale_factor, "postscale_factor": postscale_factor}
    for label, factor in factors.items():
        if not isinstance(factor, numbers.Real):
            raise TypeError("%s must be a real number, got %r" % (label, factor))
    return (tensor, name or "", int(op), float(prescale_factor), float(postscale_factor))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0):
    """Starts reducing `tensor` across all ranks into a new tensor; returns a handle for
    poll() and synchronize(), which returns the result.

    op: Average (default), Sum, Min, Max or Product. prescale_factor multiplies the input
    before the reduction and postscale_factor the result after it. name identifies the
    request across ranks; without one, requests are matched by the order they are made in.
    The tensor must not be modified until the request is synchronized.
    """
    op = resolve_reduce_op(op, average)
    output, handle = _call(
        ops.allreduce_async, *_request_args(tensor, name, op, prescale_factor, postscale_factor)
    )
    _outputs[handle] = output
    return handle


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0):
    """Like allreduce_async, but the result replaces the contents of `tensor`;
    synchronize() returns `tensor`."""
    op = resolve_reduce_op(op, average)
    handle = _call(
        ops.allreduce_async_, *_request_args(tensor, name, op, prescale_factor, postscale_factor)
    )
    _outputs[handle] = tensor
    return handle


def poll(handle):
    """True if the request behind `handle` has finished (synchronize() will not block)."""
    return _call(ops.poll, handle)


def synchronize(handle):
    """Waits for the request behind `handle` and returns its output tensor; raises the
    request's error if it failed. A handle can be synchronized once."""
    try:
        while not _call(ops.wait, handle, _WAIT_SLICE_SECONDS):
            pass
    except KeyboardInterrupt:
        raise  # the request is still pending; synchronize() may be called again
    except BaseException:
        _outputs.pop(handle, None)
        raise
    return _outputs.pop(handle)


class _Allreduce(torch.autograd.Function):
    """Allreduce as a differentiable function: for Sum and Average, the gradient of every
    input is the same reduction of the output gradients."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor):
        ctx.op = op
        ctx.scales = (prescale_factor, postscale_factor)
        return synchronize(
            allreduce_async(tensor, name=name, op=op, prescale_factor=prescale_factor,
                            postscale_factor=postscale_factor)
        )

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.op not in (Average, Sum):
            raise NotImplementedError(
                "the gradient of allreduce is implemented for Average and Sum, not %s"
                % ReduceOp(ctx.op).name
            )
        prescale, postscale = ctx.scales
        grad = synchronize(
            allreduce_async(grad_output, op=ctx.op, prescale_factor=prescale,
                            postscale_factor=postscale)
        )
        return grad, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=None, op=None,
              prescale_factor=1.0, postscale_factor=1.0):
    """Reduces `tensor` across all ranks and returns the result as a new tensor; `tensor`
    is left unchanged. Differentiable for Average and Sum.

    op: Average (default), Sum, Min, Max or Product; average: deprecated, True means
    Average and False Sum. compression: e.g. Compression.fp16 to reduce floating-point
    tensors as float16. prescale_factor/postscale_factor multiply the input before and the
    result after the reduction. name identifies the request across ranks.
    """
    op = resolve_reduce_op(op, average)
    compression = compression or Compression.none
    compressed, context = compression.compress(tensor)
    reduced = _Allreduce.apply(compressed, name, op, prescale_factor, postscale_factor)
    return compression.decompress(reduced, context)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0):
    """Reduces `tensor` across all ranks in place and returns it."""
    return synchronize(
        allreduce_async_(tensor, average=average, name=name, op=op,
                         prescale_factor=prescale_factor, postscale_factor=postscale_factor)
    )
