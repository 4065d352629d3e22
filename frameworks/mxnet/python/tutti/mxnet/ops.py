"""Collective operations on MXNet NDArrays, run asynchronously by MXNet's engine.

Each call returns at once. The reduction runs when MXNet's dependency engine has finished
every earlier write to the input; reading the result (asnumpy(), wait_to_read(), or any
operator that uses it) waits for it. A failure reported by the core surfaces there as
mxnet.base.MXNetError carrying the core's message.
"""

import itertools

import mxnet as mx
import numpy
from tutti.common import basics
from tutti.common.basics import resolve_reduce_op
from tutti.common.exceptions import NotInitializedError, UnsupportedError

from . import _native

# Devices whose NDArrays live in host memory, which is where the core reads and writes.
_HOST_DEVICES = ("cpu", "cpu_pinned", "cpu_shared")

# Names for requests the caller did not name; every rank issues them in the same order.
_unnamed_requests = itertools.count()


def dtype_name(array):
    """The element type of an NDArray as named in tutti.common.basics.DTYPE."""
    dtype = numpy.dtype(array.dtype)
    if dtype.names == ("bfloat16",):  # MXNet spells bfloat16 as a structured dtype
        return "bfloat16"
    return dtype.name


def check_tensor(tensor, function):
    """Raises a clear error for anything the core cannot reduce."""
    if not isinstance(tensor, mx.nd.NDArray):
        raise TypeError(
            "tutti.mxnet.%s expects an mxnet.nd.NDArray, got %s" % (function, type(tensor).__name__)
        )
    if tensor.stype != "default":
        raise UnsupportedError(
            "tutti.mxnet.%s supports dense NDArrays only, got storage type %r; convert with "
            "tensor.tostype('default')" % (function, tensor.stype)
        )
    if tensor.context.device_type not in _HOST_DEVICES:
        raise UnsupportedError(
            "tutti.mxnet.%s supports NDArrays in host memory only, got one on %s; copy it with "
            "tensor.as_in_context(mx.cpu())" % (function, tensor.context)
        )
    name = dtype_name(tensor)
    if name not in basics.DTYPE:
        raise TypeError(
            "tutti.mxnet.%s does not support dtype %s; supported: %s"
            % (function, name, ", ".join(sorted(basics.DTYPE)))
        )


def _check_initialized(function):
    if not basics.is_initialized():
        raise NotInitializedError(
            "tutti.mxnet.%s was called before tutti was initialized; call hvd.init() first"
            % function
        )


def _request_name(name, kind):
    if name is None:
        return "%s.noname.%d" % (kind, next(_unnamed_requests))
    if not isinstance(name, str) or not name:
        raise ValueError("name must be a non-empty string, got %r" % (name,))
    return name


def _push_allreduce(tensor, output, name, op, prescale_factor, postscale_factor, priority):
    status = _native.lib.tutti_mxnet_allreduce_async(
        tensor.handle,
        output.handle,
        name.encode("utf-8"),
        int(op),
        float(prescale_factor),
        float(postscale_factor),
        int(priority),
    )
    if status != 0:
        raise mx.base.MXNetError(_native.last_error())


def allreduce(
    tensor,
    average=None,
    name=None,
    priority=0,
    prescale_factor=1.0,
    postscale_factor=1.0,
    op=None,
):
    """Reduces `tensor` over all ranks and returns the result as a new NDArray.

    Every rank must call it with a tensor of the same shape and dtype; calls are matched
    across ranks by `name` (unnamed calls by the order in which they are made).

    op: hvd.Average (default), hvd.Sum, hvd.Min, hvd.Max or hvd.Product.
    average: deprecated; True means Average and False means Sum.
    priority: MXNet engine priority; higher values run earlier.
    prescale_factor / postscale_factor: multiply the input before and the result after
    the reduction.
    """
    check_tensor(tensor, "allreduce")
    op = resolve_reduce_op(op, average)
    _check_initialized("allreduce")
    name = _request_name(name, "allreduce")
    output = mx.nd.empty(tensor.shape, ctx=tensor.context, dtype=tensor.dtype)
    if isinstance(tensor, mx.np.ndarray):  # answer in the caller's array interface
        output = output.as_np_ndarray()
    _push_allreduce(tensor, output, name, op, prescale_factor, postscale_factor, priority)
    return output


def allreduce_(
    tensor,
    average=None,
    name=None,
    priority=0,
    prescale_factor=1.0,
    postscale_factor=1.0,
    op=None,
):
    """In-place allreduce: like allreduce(), but writes the result into `tensor` and
    returns it."""
    check_tensor(tensor, "allreduce_")
    op = resolve_reduce_op(op, average)
    _check_initialized("allreduce_")
    name = _request_name(name, "allreduce")
    _push_allreduce(tensor, tensor, name, op, prescale_factor, postscale_factor, priority)
    return tensor
