"""tutti.mxnet: distributed training for MXNet Gluon, with Horovod's API.

    import tutti.mxnet as hvd

    hvd.init()
    net = ...; net.initialize()
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.1})

Launch the script with `mpirun -np N python train.py` or `tuttirun -np N python train.py`.
"""

# MXNet 1.9 needs the numpy.bool alias restored before it is imported.
from . import _numpy_compat  # noqa: F401  (must stay first)
from .version import SUPPORTED_CORE as _SUPPORTED_CORE
from .version import __version__

from tutti.common import plugin as _plugin

_plugin.check_core_version("tutti-mxnet", __version__, _SUPPORTED_CORE)

from tutti.common.basics import (  # noqa: E402
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
from tutti.common.exceptions import (  # noqa: E402
    NotInitializedError,
    TuttiError,
)

from . import _native  # noqa: E402,F401  (loads the op library; raises a clear ImportError)
from .functions import broadcast_parameters  # noqa: E402
from .ops import allreduce, allreduce_  # noqa: E402
from .trainer import DistributedTrainer  # noqa: E402

__all__ = [
    "__version__",
    "init",
    "shutdown",
    "is_initialized",
    "rank",
    "size",
    "local_rank",
    "local_size",
    "cross_rank",
    "cross_size",
    "mpi_built",
    "gloo_built",
    "nccl_built",
    "cuda_built",
    "mpi_enabled",
    "gloo_enabled",
    "background_thread_id",
    "controller",
    "ReduceOp",
    "Average",
    "Sum",
    "Min",
    "Max",
    "Product",
    "TuttiError",
    "NotInitializedError",
    "allreduce",
    "allreduce_",
    "broadcast_parameters",
    "DistributedTrainer",
]
