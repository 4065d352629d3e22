"""Tracks asynchronous requests from submission to their completion callback.

The core calls one C function pointer, with the request's integer id as user_data, from
its background thread. The handle keeps every buffer the core reads or writes alive until
that call; the callback only records the result and sets an Event, so it never blocks
the background thread for long.
"""

import ctypes
import itertools
import threading

from tutti.common import core
from tutti.common.exceptions import error_for_status


class Handle:
    """An in-flight request. Pass it to synchronize() or poll()."""

    def __init__(self, name, result, keepalive):
        self.name = name
        self._result = result
        self._keepalive = keepalive  # buffers and ctypes structs the core may still touch
        self._event = threading.Event()
        self._status = None
        self._message = None

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
        return self._result

    def _complete(self, status, message):
        self._status = status
        self._message = message
        self._keepalive = None
        self._event.set()


_lock = threading.Lock()
_pending = {}  # request id -> Handle, until the core calls back
_ids = itertools.count(1)


def _on_done(user_data, status, message):
    with _lock:
        handle = _pending.pop(user_data, None)
    if handle is not None:
        text = message.decode("utf-8", "replace") if message else None
        handle._complete(status, text or "request %r failed" % handle.name)


# One trampoline for all requests, alive for the life of the process.
_ON_DONE = core.DONE_FN(_on_done)


def submit(name, result, keepalive, enqueue):
    """Registers a request and calls `enqueue(done_fn, user_data)` -> tutti_status.

    Returns the Handle; raises the core's error if the request was not queued.
    """
    request_id = next(_ids)
    handle = Handle(name, result, keepalive)
    with _lock:
        _pending[request_id] = handle
    status = enqueue(_ON_DONE, ctypes.c_void_p(request_id))
    if status != core.OK:
        with _lock:
            _pending.pop(request_id, None)
        core.check(status)
    return handle
