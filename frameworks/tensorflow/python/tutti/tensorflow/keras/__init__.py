"""tutti.tensorflow.keras: data-parallel training of Keras 3 models (tf.keras in
TensorFlow 2.21) with Horovod's API.

    import tutti.tensorflow.keras as hvd
    hvd.init()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01 * hvd.size())),
                  loss=...)
    model.fit(x, y, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                               hvd.callbacks.MetricAverageCallback()])

The whole tutti.tensorflow API (init, rank, size, process sets, ...) is available here
too; allreduce, allgather, broadcast and reducescatter take horovod.tensorflow.keras's
arguments (a tensor-like value, then its name).
"""

from tutti.tensorflow import *  # noqa: F401,F403  (the shared API and the collectives)
from tutti.tensorflow import Compression, __version__  # noqa: F401

from . import callbacks  # noqa: F401
from .functions import allgather, allreduce, broadcast, load_model, reducescatter  # noqa: F401
from .optimizer import DistributedOptimizer, broadcast_global_variables  # noqa: F401
# Not `from . import elastic`: the star import above already bound tutti.tensorflow.elastic.
import tutti.tensorflow.keras.elastic as elastic  # noqa: E402,F401  (KerasState, callbacks)
