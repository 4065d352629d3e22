"""tutti.common: the framework-neutral part of tutti.

It loads the core library (one per process, shared by every framework plugin) and offers
the functions every plugin re-exports: init/shutdown, rank/size and friends, build facts,
reduction operators, process sets and the exception classes.
"""

__version__ = "0.1.0"

from .core import library_path
from .exceptions import (
    AbortedError,
    HorovodInternalError,
    HostsUpdatedInterrupt,
    InternalError,
    InvalidArgumentError,
    NotInitializedError,
    PreconditionError,
    TuttiError,
    UnsupportedError,
)
from .basics import (
    DTYPE,
    Adasum,
    Average,
    Max,
    Min,
    Product,
    ReduceOp,
    Sum,
    background_thread_id,
    ccl_built,
    controller,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    gpu_library_error,
    gloo_built,
    gloo_enabled,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rank,
    rocm_built,
    shutdown,
    size,
)
from .lifecycle import init, is_homogeneous
from .observability import counters, start_timeline, stop_timeline
from .process_sets import (
    ProcessSet,
    add_process_set,
    global_process_set,
    remove_process_set,
)

# The shared API: every framework plugin re-exports exactly these names (`from tutti.common
# import *`), so `hvd.init()`, `hvd.rank()`, process sets and the exceptions are the same
# objects whichever framework a script imports.
__all__ = [
    "init",
    "shutdown",
    "is_initialized",
    "rank",
    "size",
    "local_rank",
    "local_size",
    "cross_rank",
    "cross_size",
    "controller",
    "background_thread_id",
    "mpi_built",
    "gloo_built",
    "nccl_built",
    "cuda_built",
    "rocm_built",
    "ccl_built",
    "ddl_built",
    "is_homogeneous",
    "gpu_library_error",
    "mpi_enabled",
    "gloo_enabled",
    "mpi_threads_supported",
    "start_timeline",
    "stop_timeline",
    "counters",
    "ReduceOp",
    "Average",
    "Sum",
    "Adasum",
    "Min",
    "Max",
    "Product",
    "ProcessSet",
    "global_process_set",
    "add_process_set",
    "remove_process_set",
    "TuttiError",
    "NotInitializedError",
    "InvalidArgumentError",
    "PreconditionError",
    "UnsupportedError",
    "AbortedError",
    "InternalError",
    "HorovodInternalError",
    "HostsUpdatedInterrupt",
]
