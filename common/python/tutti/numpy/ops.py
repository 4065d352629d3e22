"""Collective operations on numpy arrays."""

import ctypes
import itertools

import numpy

from tutti.common import core
from tutti.common.basics import Average, ReduceOp
from tutti.common.exceptions import InvalidArgumentError

from . import dtypes
from .handles import submit

_unnamed = itertools.count()


def _request_name(name, kind):
    # Unnamed requests are numbered in submission order, so the same sequence of calls
    # produces the same names on every rank.
    if name is None:
        return "%s.noname.%d" % (kind, next(_unnamed))
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError("name must be a non-empty string, got %r" % (name,))
    return name


def _reduce_op(op):
    try:
        return ReduceOp(op)
    except ValueError:
        raise InvalidArgumentError(
            "op must be one of %s, got %r" % (", ".join(o.name for o in ReduceOp), op)
        ) from None


def _tensor(array):
    shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
    view = core.Tensor(
        data=array.ctypes.data,
        dtype=dtypes.code_of(array.dtype),
        ndim=array.ndim,
        shape=ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
    )
    return view, shape


def _check_in_place(array):
    if not isinstance(array, numpy.ndarray):
        raise InvalidArgumentError(
            "an in-place operation needs a numpy.ndarray, got %s" % type(array).__name__
        )
    if not array.flags.c_contiguous:
        raise InvalidArgumentError(
            "an in-place operation needs a C-contiguous array; pass "
            "numpy.ascontiguousarray(array) or use the out-of-place function"
        )
    if not array.flags.writeable:
        raise InvalidArgumentError("an in-place operation needs a writeable array")


def _allreduce_async(source, output, op, name, prescale_factor, postscale_factor):
    op = _reduce_op(op)
    source_view, source_shape = _tensor(source)
    output_view, output_shape = _tensor(output)
    name = _request_name(name, "allreduce")  # last: a rejected call consumes no number
    keepalive = (source, output, source_view, output_view, source_shape, output_shape)

    def enqueue(done, user_data):
        return core.lib.tutti_allreduce_async(
            name.encode(), ctypes.byref(source_view), ctypes.byref(output_view), int(op),
            float(prescale_factor), float(postscale_factor), done, user_data,
        )

    return submit(name, output, keepalive, enqueue)


def allreduce_async(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0):
    """Starts an allreduce of `array` into a new array; returns a handle for synchronize().
    `array` must not change until the request completes."""
    source = numpy.asarray(array, order="C")
    output = numpy.empty_like(source, order="C")
    return _allreduce_async(source, output, op, name, prescale_factor, postscale_factor)


def allreduce_async_(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0):
    """Starts an in-place allreduce of the C-contiguous numpy array `array`; returns a
    handle for synchronize()."""
    _check_in_place(array)
    return _allreduce_async(array, array, op, name, prescale_factor, postscale_factor)


def allreduce(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces `array` over all ranks and returns the result as a new array.

    op: Average, Sum, Min, Max or Product. prescale_factor multiplies the input before
    the reduction and postscale_factor the result after it. `name` identifies the request
    across ranks; when omitted, requests are numbered in call order.
    """
    return synchronize(
        allreduce_async(array, op, name, prescale_factor, postscale_factor)
    )


def allreduce_(array, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0):
    """Like allreduce(), but writes the result into `array` and returns it."""
    return synchronize(
        allreduce_async_(array, op, name, prescale_factor, postscale_factor)
    )


def synchronize(handle, timeout=None):
    """Waits for an asynchronous request and returns its result array; raises the
    request's error (a tutti.common.TuttiError subclass) if it failed."""
    return handle.wait(timeout)


def poll(handle):
    """True if the request behind `handle` has completed."""
    return handle.done()
