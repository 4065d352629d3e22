"""Process-level functions shared by every framework: lifecycle, topology, build facts."""

import atexit
import enum
import warnings

from . import core
from .exceptions import NotInitializedError


class ReduceOp(enum.IntEnum):
    """Reduction applied by allreduce; the values are tutti_reduce_op of the C ABI."""

    Average = 0
    Sum = 1
    Min = 2
    Max = 3
    Product = 4


Average = ReduceOp.Average
Sum = ReduceOp.Sum
Min = ReduceOp.Min
Max = ReduceOp.Max
Product = ReduceOp.Product

# Element type name -> tutti_dtype code of the C ABI.
DTYPE = {
    "uint8": 0,
    "int8": 1,
    "uint16": 2,
    "int16": 3,
    "int32": 4,
    "int64": 5,
    "float16": 6,
    "bfloat16": 7,
    "float32": 8,
    "float64": 9,
    "bool": 10,
}


# Number of times init() started the core in this process; identifies the running session,
# so that registrations of an earlier session (process sets) are recognised as stale.
_session = 0


def session():
    """Number of the running session: how many times init() started the core."""
    return _session


def init(process_sets=None):
    """Starts tutti in this process: reads the TUTTI_* environment, connects to the other
    ranks (MPI under mpirun, Gloo under tuttirun, alone otherwise) and starts the core's
    background thread.

    process_sets: ProcessSets (or lists of global ranks) to register right after the core
    starts, the same on every rank; they stay registered until shutdown(). Calling init()
    again while initialized only registers the given sets that are not registered yet.
    Returns the registered ProcessSets, in the order given (lists become ProcessSets). A
    failure raises the core's error; an init() that started the core and then failed to
    register a set shuts the core down again.
    """
    global _session
    from . import process_sets as sets

    wanted = sets.normalized_list(process_sets)  # bad arguments fail before connecting
    started = not core.lib.tutti_is_initialized()
    if started:
        from . import elastic

        elastic.before_init()  # an elastic worker first learns its rank in the next generation
        core.check(core.lib.tutti_init())
        _session += 1
    try:
        return sets.register_static(wanted)
    except Exception:
        if started:
            core.lib.tutti_shutdown()
        raise


def shutdown():
    """Fails pending requests, stops the background thread and releases the transport.
    init() may be called again afterwards."""
    core.check(core.lib.tutti_shutdown())


def is_initialized():
    """True between init() and shutdown()."""
    return bool(core.lib.tutti_is_initialized())


def _topology(function):
    value = function()
    if value < 0:
        raise NotInitializedError(
            core.last_error() or "tutti is not initialized; call init() first"
        )
    return value


def rank():
    """Index of this process among all processes of the job."""
    return _topology(core.lib.tutti_rank)


def size():
    """Number of processes in the job."""
    return _topology(core.lib.tutti_size)


def local_rank():
    """Index of this process among the processes on its host."""
    return _topology(core.lib.tutti_local_rank)


def local_size():
    """Number of processes on this process's host."""
    return _topology(core.lib.tutti_local_size)


def cross_rank():
    """Index of this process's host among the job's hosts."""
    return _topology(core.lib.tutti_cross_rank)


def cross_size():
    """Number of hosts in the job."""
    return _topology(core.lib.tutti_cross_size)


def controller():
    """Name of the controller in use: "mpi", "gloo" or "local"; "" before init()."""
    return core.lib.tutti_controller().decode()


def mpi_enabled():
    """True when the running job communicates through MPI."""
    return controller() == "mpi"


def gloo_enabled():
    """True when the running job communicates through Gloo."""
    return controller() == "gloo"


def _built(name):
    return bool(core.lib.tutti_built(name.encode()))


def mpi_built():
    """True when the core was compiled with MPI support."""
    return _built("mpi")


def gloo_built():
    """True when the core was compiled with Gloo support."""
    return _built("gloo")


def nccl_built():
    """True when the core was compiled with NCCL support."""
    return _built("nccl")


def cuda_built():
    """True when the core was compiled with CUDA support."""
    return _built("cuda")


def mpi_threads_supported():
    """True when the job runs on MPI initialized with MPI_THREAD_MULTIPLE, so that the
    application may call MPI from several threads itself."""
    rank()  # raises NotInitializedError before init()
    return bool(core.lib.tutti_mpi_threads_supported())


def background_thread_id():
    """Linux thread id of the core's background thread (0 before init()). Every framework
    in one process reports the same id, because they share one core."""
    return int(core.lib.tutti_background_thread_id())


@atexit.register
def _shutdown_at_exit():
    # Stop the background thread while the interpreter can still run completion callbacks.
    if core.lib.tutti_is_initialized():
        core.lib.tutti_shutdown()


def resolve_reduce_op(op=None, average=None):
    """The ReduceOp for Horovod's pair of arguments: `op`, or the deprecated `average` flag.

    Average when both are None; giving both is an error, as is an unknown op. Every plugin's
    collectives use this, so the rule and its messages are the same in every framework.
    """
    if op is not None and average is not None:
        raise ValueError("pass either op or the deprecated average argument, not both")
    if average is not None:
        warnings.warn(
            "the average argument is deprecated; pass op=hvd.Average or op=hvd.Sum",
            DeprecationWarning,
            stacklevel=3,
        )
        return ReduceOp.Average if average else ReduceOp.Sum
    if op is None:
        return ReduceOp.Average
    try:
        return ReduceOp(op)
    except ValueError:
        raise ValueError(
            "op must be one of hvd.Average, hvd.Sum, hvd.Min, hvd.Max, hvd.Product; got %r" % (op,)
        ) from None
