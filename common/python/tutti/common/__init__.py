"""tutti.common: the framework-neutral part of tutti.

It loads the core library (one per process, shared by every framework plugin) and offers
the functions every plugin re-exports: init/shutdown, rank/size and friends, build facts,
reduction operators and the exception classes.
"""

__version__ = "0.1.0"

from .core import library_path
from .exceptions import (
    AbortedError,
    InternalError,
    InvalidArgumentError,
    NotInitializedError,
    PreconditionError,
    TuttiError,
    UnsupportedError,
)
from .basics import (
    DTYPE,
    Average,
    Max,
    Min,
    Product,
    ReduceOp,
    Sum,
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
