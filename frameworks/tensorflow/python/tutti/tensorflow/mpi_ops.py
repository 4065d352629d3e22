"""Horovod's module path horovod.tensorflow.mpi_ops, for scripts that import from it:
the collectives, the graph ops and the basics, with Horovod's signatures, including its
private-looking helpers (_allreduce, _grouped_allreduce, _reducescatter,
_grouped_reducescatter) that scripts and libraries call directly."""

from tutti.common import *  # noqa: F401,F403  (init, size, rank, process sets, ops, ...)
from tutti.common.basics import Sum
from tutti.common.process_sets import global_process_set

from .collectives import (  # noqa: F401
    allgather,
    allreduce,
    alltoall,
    broadcast,
    grouped_allgather,
    grouped_allreduce,
    grouped_reducescatter,
    join,
    reducescatter,
)
from .functions import broadcast_  # noqa: F401
from .ops import (  # noqa: F401
    local_rank_op,
    local_size_op,
    process_set_included_op,
    rank_op,
    size_op,
)


def _allreduce(tensor, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
               ignore_name_scope=False, process_set=global_process_set):
    """allreduce() with Horovod's low-level defaults: op=Sum, no compression."""
    return allreduce(tensor, op=op, prescale_factor=prescale_factor,
                     postscale_factor=postscale_factor, name=name, process_set=process_set,
                     ignore_name_scope=ignore_name_scope)


def _grouped_allreduce(tensors, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
                       ignore_name_scope=False, process_set=global_process_set):
    """grouped_allreduce() with Horovod's low-level defaults (op=Sum)."""
    return grouped_allreduce(tensors, op=op, prescale_factor=prescale_factor,
                             postscale_factor=postscale_factor, process_set=process_set,
                             ignore_name_scope=ignore_name_scope, name=name)


def _reducescatter(tensor, name=None, op=Sum, ignore_name_scope=False,
                   process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter() with Horovod's low-level defaults (op=Sum)."""
    return reducescatter(tensor, op=op, name=name, process_set=process_set,
                         ignore_name_scope=ignore_name_scope, prescale_factor=prescale_factor,
                         postscale_factor=postscale_factor)


def _grouped_reducescatter(tensors, name=None, op=Sum, ignore_name_scope=False,
                           process_set=global_process_set, prescale_factor=1.0,
                           postscale_factor=1.0):
    """grouped_reducescatter() with Horovod's low-level defaults (op=Sum)."""
    del ignore_name_scope
    return grouped_reducescatter(tensors, op=op, process_set=process_set,
                                 prescale_factor=prescale_factor,
                                 postscale_factor=postscale_factor, name=name)
