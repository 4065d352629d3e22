"""Process-level functions shared by every framework: lifecycle, topology, build facts."""

import atexit
import enum
import warnings

from . import c_api, core
from .exceptions import InvalidArgumentError, NotInitializedError


class ReduceOp(enum.IntEnum):
    """Reduction applied by allreduce, with Horovod 0.28.1's numeric values (scripts
    compare and store them). The C ABI numbers them differently; core_reduce_op() is the
    one place that translates."""

    Average = 0
    Sum = 1
    Adasum = 2
    Min = 3
    Max = 4
    Product = 5


Average = ReduceOp.Average
Sum = ReduceOp.Sum
Adasum = ReduceOp.Adasum
Min = ReduceOp.Min
Max = ReduceOp.Max
Product = ReduceOp.Product

# ReduceOp -> tutti_reduce_op of the C ABI: the members share their names.
_CORE_REDUCE_OP = {op: int(c_api.ReduceCode[op.name.upper()]) for op in ReduceOp}
_FROM_CORE_REDUCE_OP = {code: op for op, code in _CORE_REDUCE_OP.items()}
# The reductions that need nothing but their code (Adasum first checks the ranks): the
# frontends' short paths for plain in-place calls look them up here.
PLAIN_REDUCE_CODES = {op: code for op, code in _CORE_REDUCE_OP.items() if op != ReduceOp.Adasum}


def core_reduce_op(op):
    """The C ABI's tutti_reduce_op code for `op` (a ReduceOp or its Horovod value). Every
    frontend passes reductions to the core through this function."""
    code = _CORE_REDUCE_OP.get(op)
    if code is None:
        raise InvalidArgumentError(
            "op must be one of %s; got %r" % (", ".join("hvd." + o.name for o in ReduceOp), op))
    return code


def reduce_op_from_core(code):
    """The ReduceOp for a C ABI tutti_reduce_op code (inverse of core_reduce_op)."""
    return _FROM_CORE_REDUCE_OP[int(code)]


# Element type name -> tutti_dtype code of the C ABI ("float32": 8), in the order of the codes.
DTYPE = c_api.dtype_names()


# Number of times init() started the core in this process; identifies the running session,
# so that registrations of an earlier session (process sets) are recognised as stale.
_session = 0


def session():
    """Number of the running session: how many times init() started the core."""
    return _session


def start_session():
    """Starts the core (tutti.common.lifecycle.init does, once an elastic worker knows its
    place) and counts a new session."""
    global _session
    core.check(core.lib.tutti_init())
    _session += 1


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
    """True when NCCL can be used: the core loads libnccl at run time (system or pip
    nvidia-nccl-cu13); see gpu_library_error("nccl") for why not."""
    return _built("nccl")


def cuda_built():
    """True when CUDA tensors can be used: the core loads libcudart at run time (CUDA
    toolkit or pip nvidia-cuda-runtime); see gpu_library_error("cuda") for why not."""
    return _built("cuda")


def rocm_built():
    """False: tutti has no ROCm backend (Horovod's rocm_built)."""
    return False


def ccl_built():
    """False: tutti has no oneCCL backend (Horovod's ccl_built)."""
    return False


def ddl_built():
    """False: tutti has no IBM DDL backend (Horovod's ddl_built)."""
    return False


def gpu_library_error(name):
    """Why "cuda" or "nccl" cannot be loaded ("" when it can): the paths tried and the fix."""
    message = core.lib.tutti_gpu_library_error(name.encode())
    return message.decode("utf-8", "replace") if message else ""


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
    if type(op) is ReduceOp:  # hvd.Sum etc.: nothing to look up
        return op
    try:
        return ReduceOp(op)
    except ValueError:
        raise ValueError(
            "op must be one of hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product; "
            "got %r" % (op,)
        ) from None
