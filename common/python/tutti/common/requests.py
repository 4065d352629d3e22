"""The one Python request layer of tutti-core: turns host arrays (numpy) and a
collective's arguments into a tutti_request and queues it with the core.

One call into tutti.common._host_requests (a CPython module) reads the arrays, names the
request and queues it. tutti.numpy's collectives are this layer with Horovod's
signatures; tutti.common uses it for its own small collectives (init, elastic state), and
frontends whose tensors live in host memory may hand it numpy views of them. Names come
from tutti.common.naming, the process set's id from tutti.common.process_sets, completion
from tutti.common.handles.
"""

import ctypes
import numbers
import threading

import numpy

from . import _host_requests, basics, core, dtypes, handles, naming, process_sets
from .basics import ReduceOp
from .exceptions import InvalidArgumentError, error_for_status

_global_set = process_sets.global_process_set


def reduce_op(op):
    if type(op) is ReduceOp:  # hvd.Sum etc.: nothing to resolve
        return op
    try:
        return ReduceOp(op)
    except ValueError:
        raise InvalidArgumentError(
            "op must be one of %s, got %r" % (", ".join(o.name for o in ReduceOp), op)
        ) from None


def scale_factor(value, which):
    if type(value) is float:  # the usual case, without the abstract-class checks
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgumentError("%s must be a number, got %r" % (which, value))
    return float(value)


def rank_argument(value, which):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError("%s must be an integer, got %r" % (which, value))
    return int(value)


def source_array(array):
    """`array` as a C-contiguous numpy array (a copy only when needed)."""
    return numpy.asarray(array, order="C")


def check_in_place(array):
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


def group(arrays, what):
    """The list of arrays of a grouped call; InvalidArgumentError for an empty or non-list
    argument."""
    if isinstance(arrays, numpy.ndarray) or not isinstance(arrays, (list, tuple)):
        raise InvalidArgumentError("%s needs a list of arrays, got %s"
                                   % (what, type(arrays).__name__))
    if not arrays:
        raise InvalidArgumentError("%s needs at least one array" % what)
    return list(arrays)


class _ThreadState(threading.local):
    blocking = False  # set by run_blocking() while its call submits: that request is run


_this_thread = _ThreadState()

# How long tutti_run may run cycles on the caller before leaving the request to the core's
# thread: the same slice as Handle.wait's, so that Ctrl-C is noticed as soon.
_RUN_SLICE_SECONDS = 0.2


def run_blocking(start, *args):
    """`start(*args).wait()` for a caller that waits right away: the one request start()
    submits goes through tutti_run, so while the core's thread is idle the cycles that
    negotiate and execute it run on this thread (with the GIL released), without a
    hand-off to the core's thread or a wake-up of either."""
    _this_thread.blocking = True
    try:
        handle = start(*args)
    finally:
        _this_thread.blocking = False
    return handle.wait()


def run(collective, kind, name, process_set, arrays, op, prescale, postscale):
    """An in-place request on `arrays` (inputs and outputs) submitted and waited for, for a
    synchronous call that needs no handle (allreduce_): through tutti_run, without a
    result function or a pending entry. Raises the request's error."""
    _run_in_place(collective, kind, name, process_sets.request_id(process_set), arrays,
                  basics.core_reduce_op(op), prescale, postscale)


# The short paths of one in-place array (common/python_entry/host_requests.cc) take a
# request straight to the native calls when its arguments need no conversion or check in
# Python: a non-empty str name, the global set, a ReduceOp other than Adasum, float factors,
# a C-contiguous writable numpy.ndarray of a supported dtype. Anything else is declined
# (nothing done) and takes the general path, which gives every error its message. Why:
# after an idle spell each Python function a call runs costs tens of microseconds on small
# VMs, and a gradient loop pays for each one per array.
#
# run_plain(collective, array, name, op, prescale, postscale, process_set[, root_rank]):
# run() of one such array (a broadcast's with root_rank, an int; its op and factors are
# ignored); True once done (raising the request's error), False when declined.
run_plain = _host_requests.run_plain

# submit_plain(the same arguments): submit() of one such array; its native handle
# (_host_requests.InPlaceRequest: wait() and done() like a Handle's) returns the array.
# None when declined. run_blocking() never starts an in-place allreduce_async_, so this
# path needs no look at it.
submit_plain = _host_requests.submit_plain

# allgather_plain(array, name, process_set): allgather() of one such array (read-only is
# fine); the gathered array, or None when declined.
allgather_plain = _host_requests.allgather_plain


def _run_in_place(collective, kind, name, set_id, arrays, op_code, prescale, postscale):
    # One native call submits, runs and waits, with a completion record of its own: no
    # Handle, no ctypes record (see run_in_place in common/python_entry/host_requests.cc).
    status, message = _host_requests.run_in_place(
        name, kind, set_id, collective, arrays, op_code, prescale, postscale, _RUN_SLICE_SECONDS)
    if status != core.OK:
        if message is None:  # refused before it was queued
            core.check(status)
        raise error_for_status(
            status, message.decode("utf-8", "replace") or "request %r failed" % (name or kind))


def _same_arrays(a, b):
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def int32_buffer(count):
    return numpy.zeros(max(count, 1), dtype=numpy.int32)


def submit(collective, kind, name, process_set, inputs, finish, outputs=None,
           allocates=False, op=ReduceOp.Average, prescale=1.0, postscale=1.0, root_rank=0,
           splits=None, received_splits=None, result=None):
    """Queues one request with the core and returns its Handle.

    inputs: C-contiguous arrays; outputs: arrays of the same shapes (allreduce, broadcast),
    or None when the core allocates them (allocates=True) through the handle. splits,
    received_splits and result are int32 arrays the core reads or fills. finish(allocated)
    builds the result synchronize() returns.
    """
    set_id = process_sets.request_id(process_set)
    if outputs is not None and outputs is not inputs and _same_arrays(outputs, inputs):
        outputs = inputs  # in place: one list, so the module reuses the inputs' views
    # The core copies the request and the views while it is queued, but reads and writes
    # the data, splits and result buffers until `done`.
    keepalive = (inputs, outputs, splits, received_splits, result)
    run_seconds = _RUN_SLICE_SECONDS if _this_thread.blocking else -1.0
    _this_thread.blocking = False  # only the call's own request
    reduce_op_code = basics.core_reduce_op(op)

    def enqueue(user_data):
        return _host_requests.submit(
            name, kind, set_id, collective, inputs, outputs, allocates, reduce_op_code,
            prescale, postscale, root_rank, splits, received_splits, result, user_data,
            run_seconds)

    output_dtypes = [a.dtype for a in inputs] if allocates else ()
    return handles.submit(finish, keepalive, enqueue, output_dtypes)


# The module that queues a request in one call (common/python_entry/host_requests.cc), given
# the core's functions, the allocate trampoline, the dtype codes and the naming rule.
_host_requests.bind(
    ctypes.cast(core.lib.tutti_enqueue, ctypes.c_void_p).value,
    ctypes.cast(core.lib.tutti_run, ctypes.c_void_p).value,
    ctypes.cast(core.lib.tutti_completion_done, ctypes.c_void_p).value,
    ctypes.cast(core.lib.tutti_completion_wait, ctypes.c_void_p).value,
    ctypes.cast(core.lib.tutti_completion_test, ctypes.c_void_p).value,
    ctypes.cast(handles.ON_ALLOCATE, ctypes.c_void_p).value,
    dtypes.codes(),
    dtypes.code_of,
    naming.request_name,
)
_host_requests.bind_errors(core.check, error_for_status)
_host_requests.bind_plain(_global_set, numpy.ndarray, basics.PLAIN_REDUCE_CODES,
                          _RUN_SLICE_SECONDS, numpy.empty)
