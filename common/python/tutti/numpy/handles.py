"""Tracks asynchronous requests from submission to their completion callback.

The core calls two C function pointers with the request's integer id as user_data, from its
background thread: `allocate` when an output's shape is known (allgather, alltoall,
reducescatter) and `done` exactly once at the end. The handle keeps every buffer the core
reads or writes alive until `done`; the callbacks only create arrays, record the outcome and
set an Event, so they never hold up the background thread for long.
"""

import ctypes
import itertools
import threading

import numpy

from tutti.common import core
from tutti.common.exceptions import error_for_status


class Handle:
    """An in-flight request. Pass it to synchronize() or poll()."""

    def __init__(self, name, finish, keepalive, output_dtypes=()):
        self.name = name
        self._finish = finish  # allocated outputs (index -> array) -> the request's result
        self._keepalive = keepalive  # buffers the core may still read or write
        self._output_dtypes = list(output_dtypes)  # dtype of each output `allocate` makes
        self._allocated = {}
        self._allocation_error = None
        self._event = threading.Event()
        self._status = None
        self._message = None
        self._result = None
        self._finished = False

    def done(self):
        """True once the request completed, successfully or not."""
        return self._event.is_set()

    def wait(self, timeout=None):
        """Waits for completion and returns the result, or raises the request's error.
        With a timeout (seconds), raises TimeoutError if the request is still running."""
        if not self._event.wait(timeout):
            raise TimeoutError(
                "request %r did not complete within %s seconds" % (self.name, timeout)
            )
        if self._status != core.OK:
            raise error_for_status(self._status, self._message)
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

    def _complete(self, status, message):
        if status != core.OK and self._allocation_error is not None:
            message = "%s (allocating the output failed: %s)" % (message, self._allocation_error)
        self._status = status
        self._message = message
        self._keepalive = None
        self._event.set()


_lock = threading.Lock()
_pending = {}  # request id -> Handle, until the core calls `done`
_ids = itertools.count(1)


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


def _on_done(user_data, status, message):
    with _lock:
        handle = _pending.pop(user_data, None)
    if handle is not None:
        text = message.decode("utf-8", "replace") if message else None
        handle._complete(status, text or "request %r failed" % handle.name)


# One trampoline of each kind for all requests, alive for the life of the process.
ON_ALLOCATE = core.ALLOCATE_FN(_on_allocate)
ON_DONE = core.DONE_FN(_on_done)


def submit(name, finish, keepalive, enqueue, output_dtypes=()):
    """Registers a request and calls `enqueue(user_data)` -> tutti_status, which must pass
    ON_DONE (and ON_ALLOCATE where needed) with `user_data` to the core.

    Returns the Handle; raises the core's error if the request was not queued.
    """
    request_id = next(_ids)
    handle = Handle(name, finish, keepalive, output_dtypes)
    with _lock:
        _pending[request_id] = handle
    status = enqueue(ctypes.c_void_p(request_id))
    if status != core.OK:
        with _lock:
            _pending.pop(request_id, None)
        core.check(status)
    return handle
