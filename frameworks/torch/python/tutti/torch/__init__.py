"""tutti.torch: data-parallel training for PyTorch with Horovod's API.

    import tutti.torch as hvd
    hvd.init()
    total = hvd.allreduce(torch.ones(3), op=hvd.Sum)

Launch the script with `mpirun -np N python script.py` or `tuttirun -np N python script.py`.
"""

from tutti.common import plugin as _plugin

from .version import CORE_REQUIREMENT as _CORE_REQUIREMENT
from .version import __version__

# Refuse a tutti-core outside the supported range before touching the native library.
_plugin.check_core_version("tutti-torch", __version__, _CORE_REQUIREMENT)

from tutti.common import *  # noqa: E402,F401,F403  (the shared API, see tutti.common.__all__)

from .reductions import (  # noqa: E402
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
from .compression import Compression  # noqa: E402
from .control import barrier, join, poll, synchronize  # noqa: E402
from .data_movement import (  # noqa: E402
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
    sparse_allreduce_async,
)
from .functions import (  # noqa: E402
    allgather_object,
    broadcast_object,
    broadcast_optimizer_state,
    broadcast_parameters,
)
from .optimizer import DistributedOptimizer  # noqa: E402
from .sync_batch_norm import SyncBatchNorm  # noqa: E402
from . import mpi_ops  # noqa: E402,F401  (Horovod scripts use hvd.mpi_ops.<name>)
from . import elastic  # noqa: E402,F401  (hvd.elastic.run, TorchState, ElasticSampler)
