"""Waiting for requests, and the collectives without data: barrier and join. The same
for every frontend: a frontend's own join() ends here, or at least in
naming.restart_numbering(), the one restart of request numbering after join."""

from . import core, naming, requests
from .process_sets import global_process_set


def synchronize(handle, timeout=None):
    """Waits for an asynchronous request and returns its result; raises the request's
    error (a tutti.common.TuttiError subclass) if it failed, or TimeoutError if `timeout`
    seconds pass first (the request keeps running)."""
    return handle.wait(timeout)


def poll(handle):
    """True if the request behind `handle` has completed."""
    return handle.done()


def barrier(process_set=global_process_set):
    """Returns once every rank of `process_set` has called barrier()."""
    return requests.run_blocking(requests.submit, core.BARRIER, "barrier", None, process_set,
                                 [], lambda allocated: None)


def join():
    """Tells the other ranks that this rank has no more allreduces to submit and waits
    until every rank has joined. Meanwhile this rank contributes zeros to the allreduces
    the others still make (Average still divides by the full job size); any other
    collective fails while a rank has joined. Returns the global rank that joined last.

    Afterwards every rank numbers its unnamed requests from 0 again, so that ranks which
    made different numbers of calls before join() agree on the names of the next ones."""
    result = requests.int32_buffer(1)
    result[0] = -1
    handle = requests.submit(core.JOIN, "join", None, global_process_set, [],
                             lambda allocated: int(result[0]), result=result)
    last = synchronize(handle)
    naming.restart_numbering()
    return last
