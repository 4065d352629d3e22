"""Calls that move no tensors: barrier, join, and waiting for asynchronous requests
(poll, synchronize)."""

from tutti.common import naming
from tutti.common.core import Collective
from tutti.common.process_sets import global_process_set

from . import requests
from .requests import poll, synchronize  # noqa: F401  (public here, see requests.py)


def barrier(process_set=global_process_set):
    """Returns once every rank of `process_set` has called barrier()."""
    return requests.run_blocking(requests.submit, Collective.BARRIER, "barrier", None,
                                 process_set, [], lambda results, extra: None)


def join(device=-1):
    """Tells the other ranks that this rank has no more allreduces to submit and waits
    until every rank has joined. Meanwhile this rank contributes zeros to the allreduces
    the others still make (Average still divides by the full job size); any other
    collective fails while a rank has joined. Returns the global rank that joined last.

    Afterwards every rank numbers its unnamed requests from 0 again, so that ranks which
    made different numbers of calls before join() agree on the names of the next ones.
    device is accepted for Horovod compatibility (join itself moves no tensors)."""
    last = requests.run_blocking(requests.submit, Collective.JOIN, "join", None,
                                 global_process_set, [], lambda results, extra: int(extra[0]))
    naming.restart_numbering()
    return last
