"""The functions horovod.tensorflow.keras has with its own signatures: collectives on
tensor-like values (name second, as there) and load_model()."""

import keras
import tensorflow as tf
from tutti.common.basics import Average

from .. import data_movement, reductions
from ..compression import Compression
from ..gradients import GradientReducer
from .optimizer import _distributed_class


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0,
              op=None, compression=Compression.none):
    """Reduces a tensor-like value over the ranks (default op: hvd.Average)."""
    return reductions.allreduce(tf.constant(value), average=average, op=op,
                                 prescale_factor=prescale_factor,
                                 postscale_factor=postscale_factor, name=name,
                                 compression=compression)


def allgather(value, name=None):
    """Concatenates every rank's tensor-like value along the first dimension."""
    return data_movement.allgather(tf.constant(value), name=name)


def broadcast(value, root_rank, name=None):
    """Rank `root_rank`'s tensor-like value on every rank."""
    return data_movement.broadcast(tf.constant(value), root_rank, name=name)


def reducescatter(value, name=None, op=Average):
    """Reduces a tensor-like value and returns this rank's part of the first dimension."""
    return reductions.reducescatter(tf.constant(value), op=op, name=name)


def _optimizer_classes():
    """Every optimizer class in keras.optimizers, by name."""
    return {name: cls for name, cls in vars(keras.optimizers).items()
            if isinstance(cls, type) and issubclass(cls, keras.optimizers.Optimizer)}


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none):
    """Loads a saved Keras model whose optimizer comes back as a DistributedOptimizer
    (state included), so that training resumes distributed.

    custom_optimizers: optimizer classes beyond keras.optimizers' to wrap when found.
    custom_objects: passed on to keras.models.load_model.
    compression: the compression of the restored DistributedOptimizer.
    """
    wrapped = {name: _distributed_class(cls) for name, cls in _optimizer_classes().items()}
    for cls in custom_optimizers or ():
        wrapped[cls.__name__] = _distributed_class(cls)
    objects = dict(wrapped)
    objects.update(custom_objects or {})
    model = keras.models.load_model(filepath, custom_objects=objects)
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and getattr(optimizer, "_tutti_distributed", False):
        optimizer._tutti_reducer = GradientReducer(compression=compression)
    return model
