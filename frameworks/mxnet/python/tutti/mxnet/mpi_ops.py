"""`tutti.mxnet.mpi_ops`: the module path of Horovod's MXNet collectives.

Scripts written for Horovod import from horovod.mxnet.mpi_ops (for example
`from horovod.mxnet.mpi_ops import allreduce_`); the same names live here.
"""

from tutti.common import *  # noqa: F401,F403  (init, rank, size, process sets, ...)

from .control import barrier, join  # noqa: F401
from .data_movement import (  # noqa: F401
    allgather,
    alltoall,
    broadcast,
    broadcast_,
    grouped_allgather,
)
from .reductions import (  # noqa: F401
    allreduce,
    allreduce_,
    grouped_allreduce,
    grouped_allreduce_,
    grouped_reducescatter,
    reducescatter,
)
