"""Tracks asynchronous requests from submission to completion.

Each request carries a tutti_completion record (core.Completion) as user_data. The core
completes it with the C function tutti_completion_done, so finishing a request runs no
Python on the core's thread; waiting polls briefly and then sleeps in C, without the GIL.
Requests whose output shape is known only after negotiation (allgather, alltoall,
reducescatter) also get the Python `allocate` callback, which finds the handle by the
record's address. A handle and every buffer the core reads or writes stay referenced from
`_pending` until the request is done.
"""

import ctypes
import itertools
import threading
import time

import numpy

from . import core
from .exceptions import error_for_status


class Handle:
    """An in-flight request. Pass it to synchronize() or poll()."""

    def __init__(self, name, finish, keepalive, output_dtypes=()):
        self.name = name
        self._finish = finish  # allocated outputs (index -> array) -> the request's result
        self._keepalive = keepalive  # buffers the core may still read or write
        self._output_dtypes = list(output_dtypes)  # dtype of each output `allocate` makes
        self._allocated = {}
        self._allocation_error = None
        self.completion = core.Completion()
        self._result = None
        self._finished = False

    def done(self):
        """True once the request completed, successfully or not."""
        return bool(core.lib.tutti_completion_test(ctypes.addressof(self.completion)))

    def wait(self, timeout=None):
        """Waits for completion and returns the result, or raises the request's error.
        With a timeout (seconds), raises TimeoutError if the request is still running."""
        record = ctypes.addressof(self.completion)
        deadline = None if timeout is None else time.monotonic() + timeout
        # Short slices keep Ctrl-C responsive.
        while not core.lib.tutti_completion_wait(
                record, 0.2 if deadline is None else min(0.2, max(0.0, deadline - time.monotonic()))):
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    "request %r did not complete within %s seconds" % (self.name, timeout)
                )
        _forget(record)
        self._keepalive = None
        status = self.completion.status
        if status != core.OK:
            message = self.completion.message.decode("utf-8", "replace") or (
                "request %r failed" % self.name)
            if self._allocation_error is not None:
                message = "%s (allocating the output failed: %s)" % (
                    message, self._allocation_error)
            raise error_for_status(status, message)
        if not self._finished:
            self._result = self._finish(self._allocated)
            self._finished = True
        return self._result

    def _allocate(self, index, shape):
        try:
            dtype = self._output_dtypes[index]
        except IndexError:
            raise ValueError("the core asked for output %d of a request with %d outputs"
                             % (index, len(self._output_dtypes))) from None
        array = numpy.empty(shape, dtype=dtype)
        self._allocated[index] = array
        return array.ctypes.data


_lock = threading.Lock()
_pending = {}  # request id -> Handle, until the core calls `done`
_submissions = itertools.count(1)


def _lookup(user_data):
    with _lock:
        return _pending.get(user_data)


def _on_allocate(user_data, index, ndim, shape):
    handle = _lookup(user_data)
    if handle is None:
        return None
    try:
        return handle._allocate(index, tuple(shape[i] for i in range(ndim)))
    except Exception as exc:  # a NULL return fails the request; keep the reason for it
        handle._allocation_error = "%s: %s" % (type(exc).__name__, exc)
        return None


def _forget(record):
    with _lock:
        _pending.pop(record, None)


def _sweep():
    """Drops finished requests nobody waited for (fire and forget), releasing their buffers."""
    with _lock:
        finished = [key for key, handle in _pending.items() if handle.done()]
        for key in finished:
            del _pending[key]


# The allocate trampoline for all requests, alive for the life of the process, and the
# core's own completion function as the `done` callback.
ON_ALLOCATE = core.ALLOCATE_FN(_on_allocate)
ON_DONE = ctypes.cast(core.lib.tutti_completion_done, core.DONE_FN)


def submit(finish, keepalive, enqueue, output_dtypes=()):
    """Registers a request and calls `enqueue(user_data)` -> (tutti_status, the request's
    name), which must pass ON_DONE (and ON_ALLOCATE where needed) with `user_data` to the
    core.

    Returns the Handle; raises the core's error if the request was not queued, and the
    error enqueue raises for an argument it refuses.
    """
    if next(_submissions) % 256 == 0:
        _sweep()
    handle = Handle(None, finish, keepalive, output_dtypes)
    record = ctypes.addressof(handle.completion)
    with _lock:  # registered first: the core may ask for an output before enqueue returns
        _pending[record] = handle
    try:
        status, handle.name = enqueue(record)
    except BaseException:
        _forget(record)
        raise
    if status != core.OK:
        _forget(record)
        core.check(status)
    return handle
