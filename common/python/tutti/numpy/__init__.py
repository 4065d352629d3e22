"""tutti.numpy: tutti collectives on numpy arrays, without any deep-learning framework.

    import tutti.numpy as hvd
    hvd.init()
    total = hvd.allreduce(numpy.ones(4), op=hvd.Sum)
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
    ReduceOp,
    Sum,
    TuttiError,
    UnsupportedError,
    __version__,
    background_thread_id,
    controller,
    cross_rank,
    cross_size,
    cuda_built,
    gloo_built,
    gloo_enabled,
    init,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    nccl_built,
    rank,
    shutdown,
    size,
)

from .ops import (
    allreduce,
    allreduce_,
    allreduce_async,
    allreduce_async_,
    poll,
    synchronize,
)
