"""tutti.numpy: tutti collectives on numpy arrays, without any deep-learning framework.

    import tutti.numpy as hvd
    hvd.init()
    total = hvd.allreduce(numpy.ones(4), op=hvd.Sum)

Every collective takes `name=None` (requests are matched across ranks by name; unnamed ones
are numbered in call order) and `process_set=global_process_set`. The *_async variants
return a handle for synchronize() and poll(); the *_ variants work in place.
"""

from tutti.common import (
    DTYPE,
    AbortedError,
    Average,
    InternalError,
    InvalidArgumentError,
    Max,
    Min,
    NotInitializedError,
    PreconditionError,
    Product,
    ProcessSet,
    ReduceOp,
    Sum,
    TuttiError,
    UnsupportedError,
    __version__,
    add_process_set,
    background_thread_id,
    controller,
    cross_rank,
    cross_size,
    cuda_built,
    global_process_set,
    gloo_built,
    gloo_enabled,
    init,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rank,
    remove_process_set,
    shutdown,
    size,
)

from .control import barrier, join, poll, synchronize
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
