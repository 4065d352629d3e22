"""The calls of tutti.tensorflow without data: join, barrier, and the topology as graph ops
(size_op, rank_op, ...), computed when the op runs."""

from tutti.common.process_sets import global_process_set

from . import requests
from ._native import ops as _ops


def join():
    """Tells the other ranks that this rank has no more allreduces to submit and waits
    until every rank has joined. Meanwhile this rank contributes zeros to the allreduces
    the others still make (Average still divides by the full job size); any other
    collective fails while a rank has joined. Returns the global rank that joined last,
    as an int32 scalar tensor.

    Eagerly, every rank numbers its unnamed requests from 0 again afterwards, so that
    ranks which made different numbers of calls agree on the names of the next ones."""
    return requests.join_request()


def barrier(process_set=global_process_set):
    """Returns once every rank of `process_set` has called barrier()."""
    return requests.barrier_request(requests.process_set_id(process_set))


# ---- topology ops ----

def size_op(process_set_id=0, name=None):
    """The number of ranks of a process set (0: every rank), as an int32 scalar computed
    when the op runs."""
    return _ops.tutti_size(process_set=int(process_set_id), name=name)


def process_set_included_op(process_set_id=0, name=None):
    """1 if this rank belongs to the process set, else 0, as an int32 scalar computed when
    the op runs. An unknown set raises InvalidArgumentError and a missing init()
    FailedPreconditionError when it runs (Horovod returns negative codes instead)."""
    return _ops.tutti_process_set_included(process_set=int(process_set_id), name=name)


def rank_op(name=None):
    """This process's rank, as an int32 scalar computed when the op runs."""
    return _ops.tutti_rank(name=name)


def local_size_op(name=None):
    """The number of ranks on this host, as an int32 scalar computed when the op runs."""
    return _ops.tutti_local_size(name=name)


def local_rank_op(name=None):
    """This process's rank on its host, as an int32 scalar computed when the op runs."""
    return _ops.tutti_local_rank(name=name)
