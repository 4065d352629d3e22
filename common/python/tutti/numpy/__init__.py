"""tutti.numpy: tutti collectives on numpy arrays, without any deep-learning framework.

    import tutti.numpy as hvd
    hvd.init()
    total = hvd.allreduce(numpy.ones(4), op=hvd.Sum)

Every collective takes `name=None` (requests are matched across ranks by name; unnamed ones
are numbered in call order) and `process_set=global_process_set`. The *_async variants
return a handle for synchronize() and poll(); the *_ variants work in place.
"""

from tutti.common import *  # noqa: F401,F403  (the shared API, see tutti.common.__all__)
from tutti.common import DTYPE, __version__  # noqa: F401

from tutti.common.control import barrier, join, poll, synchronize
from .data_movement import (
    allgather,
    allgather_async,
    alltoall,
    alltoall_async,
    broadcast,
    broadcast_,
    broadcast_async,
    broadcast_async_,
    grouped_allgather,
    grouped_allgather_async,
)
from .reductions import (
    allreduce,
    allreduce_,
    allreduce_async,
    allreduce_async_,
    grouped_allreduce,
    grouped_allreduce_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    grouped_reducescatter,
    grouped_reducescatter_async,
    reducescatter,
    reducescatter_async,
)
