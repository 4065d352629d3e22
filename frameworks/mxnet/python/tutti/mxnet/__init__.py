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

from tutti.common import *  # noqa: E402,F401,F403  (the shared API, see tutti.common.__all__)

from . import _native  # noqa: E402,F401  (loads the op library; raises a clear ImportError)
from .compression import Compression  # noqa: E402
from .control import barrier, join  # noqa: E402
from .data_movement import (  # noqa: E402
    allgather,
    alltoall,
    broadcast,
    broadcast_,
    grouped_allgather,
)
from .functions import allgather_object, broadcast_object, broadcast_parameters  # noqa: E402
from .optimizer import DistributedOptimizer  # noqa: E402
from .reductions import (  # noqa: E402
    allreduce,
    allreduce_,
    grouped_allreduce,
    grouped_allreduce_,
    grouped_reducescatter,
    reducescatter,
)
from .trainer import DistributedTrainer  # noqa: E402

import tutti.common as _common  # noqa: E402

__all__ = ["__version__"] + _common.__all__ + [
    "allgather",
    "allgather_object",
    "allreduce",
    "allreduce_",
    "alltoall",
    "barrier",
    "broadcast",
    "broadcast_",
    "broadcast_object",
    "broadcast_parameters",
    "Compression",
    "grouped_allgather",
    "grouped_allreduce",
    "grouped_allreduce_",
    "grouped_reducescatter",
    "join",
    "reducescatter",
    "DistributedOptimizer",
    "DistributedTrainer",
]
from . import elastic  # noqa: E402,F401  (hvd.elastic.run, MXNetState)
