"""tutti.tensorflow: distributed training for TensorFlow with Horovod's API.

    import tutti.tensorflow as hvd
    hvd.init()
    total = hvd.allreduce(tf.constant([hvd.rank()]), op=hvd.Sum)

Run the script with `mpirun -np N python script.py` or `tuttirun -np N python script.py`.
Keras 3 users import tutti.tensorflow.keras for DistributedOptimizer and the callbacks.
"""

from tutti.common import plugin as _plugin

from .version import CORE_REQUIREMENT as _CORE_REQUIREMENT
from .version import __version__

# Refuse an incompatible tutti-core before touching the native library.
_plugin.check_core_version("tutti-tensorflow", __version__, _CORE_REQUIREMENT)

from tutti.common import *  # noqa: E402,F401,F403  (the shared API, see tutti.common.__all__)

from . import mpi_ops  # noqa: E402,F401  (Horovod's module path)
from .compression import Compression  # noqa: E402
from .control import (  # noqa: E402
    barrier,
    join,
    local_rank_op,
    local_size_op,
    process_set_included_op,
    rank_op,
    size_op,
)
from .data_movement import allgather, alltoall, broadcast, grouped_allgather  # noqa: E402
from .functions import (  # noqa: E402
    allgather_object,
    broadcast_,
    broadcast_global_variables,
    broadcast_object,
    broadcast_object_fn,
    broadcast_variables,
)
from .gradient_tape import (  # noqa: E402
    DistributedGradientTape,
    PartialDistributedGradientTape,
)
from .optimizer import DistributedOptimizer  # noqa: E402
from .reductions import (  # noqa: E402
    allreduce,
    grouped_allreduce,
    grouped_reducescatter,
    reducescatter,
)
from . import elastic  # noqa: E402,F401  (hvd.elastic.run, TensorFlowState, ...)


def __getattr__(name):
    # SyncBatchNormalization needs Keras: import it (seconds) only when asked for.
    if name == "SyncBatchNormalization":
        from .sync_batch_norm import SyncBatchNormalization

        return SyncBatchNormalization
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
