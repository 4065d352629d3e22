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

from .collectives import (  # noqa: E402
    allgather,
    allreduce,
    alltoall,
    barrier,
    broadcast,
    grouped_allgather,
    grouped_allreduce,
    grouped_reducescatter,
    join,
    reducescatter,
)
from .compression import Compression  # noqa: E402
from .functions import allgather_object, broadcast_object, broadcast_variables  # noqa: E402
from .gradient_tape import (  # noqa: E402
    DistributedGradientTape,
    PartialDistributedGradientTape,
)
from .mpi_ops import local_rank_op, local_size_op, rank_op, size_op  # noqa: E402
from . import elastic  # noqa: E402,F401  (hvd.elastic.run, TensorFlowState, ...)
