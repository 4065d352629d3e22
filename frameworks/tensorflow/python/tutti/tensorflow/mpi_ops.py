"""Horovod's module path horovod.tensorflow.mpi_ops, for scripts that import from it:
the collectives, the graph ops and the basics, with Horovod's signatures, including its
private-looking helpers (_allreduce, _grouped_allreduce, _reducescatter,
_grouped_reducescatter) that scripts and libraries call directly. Re-exports only."""

from tutti.common import *  # noqa: F401,F403  (init, size, rank, process sets, ...)

from .control import (  # noqa: F401
    join,
    local_rank_op,
    local_size_op,
    process_set_included_op,
    rank_op,
    size_op,
)
from .data_movement import allgather, alltoall, broadcast, grouped_allgather  # noqa: F401
from .functions import broadcast_  # noqa: F401
from .reductions import (  # noqa: F401
    _allreduce,
    _grouped_allreduce,
    _grouped_reducescatter,
    _reducescatter,
    allreduce,
    grouped_allreduce,
    grouped_reducescatter,
    reducescatter,
)
