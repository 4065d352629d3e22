"""hvd.DistributedOptimizer of tutti.tensorflow: wraps a TF1-style optimizer
(tf.compat.v1.train.Optimizer) so that compute_gradients() averages the gradients over the
ranks; Keras optimizers are handed to tutti.tensorflow.keras.DistributedOptimizer, as in
Horovod."""

import tensorflow as tf
from tutti.common.basics import Average
from tutti.common.process_sets import global_process_set

from .compression import Compression
from .gradients import GradientReducer

_LegacyOptimizer = tf.compat.v1.train.Optimizer


class _DistributedOptimizer(_LegacyOptimizer):
    """A tf.compat.v1.train.Optimizer whose compute_gradients() returns the wrapped
    optimizer's gradients reduced over the ranks; apply_gradients(), slots and variables
    are the wrapped optimizer's (so minimize() also reduces)."""

    def __init__(self, optimizer, name, use_locking, reducer):
        super().__init__(name=name or "Distributed%s" % type(optimizer).__name__,
                         use_locking=use_locking)
        self._optimizer = optimizer
        self._reducer = reducer

    def register_local_var(self, var):
        """Keeps the gradient of `var` local: it is not reduced (model-parallel parts);
        with scale_local_gradients it is divided by the set size, as in Horovod."""
        self._reducer.add_local_variable(var)

    def compute_gradients(self, *args, **kwargs):
        """The wrapped optimizer's (gradient, variable) pairs, gradients reduced."""
        pairs = self._optimizer.compute_gradients(*args, **kwargs)
        grads, variables = zip(*pairs)
        return list(zip(self._reducer.reduce(grads, variables), variables))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Calls the wrapped optimizer's apply_gradients()."""
        return self._optimizer.apply_gradients(grads_and_vars, global_step=global_step,
                                               name=name)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="",
                         device_sparse="", compression=Compression.none,
                         sparse_as_dense=False, backward_passes_per_step=1, op=Average,
                         gradient_predivide_factor=1.0, average_aggregated_gradients=False,
                         num_groups=0, groups=None, process_set=global_process_set,
                         scale_local_gradients=True):
    """An optimizer that averages gradients over the ranks of `process_set` before
    applying them (op=hvd.Sum sums them).

    optimizer: a tf.compat.v1.train.Optimizer (wrapped here: compute_gradients() and
        minimize() reduce) or a Keras optimizer (handed to
        tutti.tensorflow.keras.DistributedOptimizer with the same options).
    backward_passes_per_step, average_aggregated_gradients: for Keras optimizers;
        tf.compat.v1 optimizers communicate every step (see docs/horovod-compatibility.md).
    The other options are DistributedGradientTape's.
    """
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if isinstance(optimizer, _LegacyOptimizer):
        if int(backward_passes_per_step) != 1:
            if tf.executing_eagerly():
                raise ValueError("backward_passes_per_step > 1 is not yet supported for "
                                 "_LegacyOptimizer with eager execution.")
            raise NotImplementedError(
                "backward_passes_per_step > 1 is not supported for tf.compat.v1 optimizers; "
                "wrap a Keras optimizer instead")
        reducer = GradientReducer(device_dense, device_sparse, compression, sparse_as_dense,
                                  op, gradient_predivide_factor, num_groups, groups,
                                  process_set, scale_local_gradients=scale_local_gradients)
        return _DistributedOptimizer(optimizer, name, use_locking, reducer)
    import keras

    if isinstance(optimizer, keras.optimizers.Optimizer):
        from .keras import DistributedOptimizer as keras_optimizer

        return keras_optimizer(optimizer, name=name, device_dense=device_dense,
                               device_sparse=device_sparse, compression=compression,
                               sparse_as_dense=sparse_as_dense,
                               gradient_predivide_factor=gradient_predivide_factor, op=op,
                               backward_passes_per_step=backward_passes_per_step,
                               average_aggregated_gradients=average_aggregated_gradients,
                               num_groups=num_groups, groups=groups, process_set=process_set,
                               scale_local_gradients=scale_local_gradients)
    raise ValueError("Provided optimizer doesn't inherit from either legacy TensorFlow or "
                     "Keras optimizer: %s" % (optimizer,))
