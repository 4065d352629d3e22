"""DistributedOptimizer for Keras 3 optimizers.

Keras 3 optimizers have one entry point for updates, `apply(grads, variables)`
(`apply_gradients(grads_and_vars)` and model.fit both go through it). The wrapper is a
subclass of the given optimizer's own class whose `apply` first averages the gradients
over the ranks, so everything else (learning rate, schedules, clipping, weight decay,
loss scaling, saving the optimizer's variables) stays the optimizer's own.
"""

import keras
import tensorflow as tf
from tutti.common.basics import Average
from tutti.common.process_sets import global_process_set

from ..compression import Compression
from ..functions import broadcast_variables
from ..gradients import GradientReducer

_SUBCLASSES = {}


def _distributed_class(base):
    """The subclass of `base` that reduces gradients before applying them (one per base)."""
    if getattr(base, "_tutti_distributed", False):
        raise ValueError("%s is already a DistributedOptimizer" % base.__name__)
    if base in _SUBCLASSES:
        return _SUBCLASSES[base]

    class Distributed(base):
        _tutti_distributed = True
        # Defaults for an optimizer made by from_config() (e.g. by load_model()).
        _tutti_passes = 1
        _tutti_average_passes = False

        @property
        def _tutti_reducer(self):
            if "_tutti_reducer_" not in self.__dict__:
                self.__dict__["_tutti_reducer_"] = GradientReducer()
            return self.__dict__["_tutti_reducer_"]

        @_tutti_reducer.setter
        def _tutti_reducer(self, reducer):
            self.__dict__["_tutti_reducer_"] = reducer

        def register_local_var(self, var):
            """Keeps the gradient of `var` local: it is not reduced (model-parallel
            parts); with scale_local_gradients it is divided by the set size, as in
            Horovod."""
            self._tutti_reducer.add_local_variable(var)

        def build(self, variables):
            super().build(variables)
            if self._tutti_passes > 1:
                # Local sums of the gradients of the passes since the last update.
                self._tutti_accumulators = [
                    self.add_variable_from_reference(v, name="tutti_accumulator")
                    for v in variables
                ]
                self._tutti_pass_count = self.add_variable(
                    shape=(), dtype="int64", initializer="zeros", name="tutti_pass_count")

        def apply(self, grads, trainable_variables=None):
            grads = list(grads)
            if not grads:
                return
            if trainable_variables is None:
                if not self.built:
                    return super().apply(grads)  # raises Keras' own error
                variables = list(self._trainable_variables)
            else:
                variables = list(trainable_variables)
            if self._tutti_passes == 1:
                super().apply(self._tutti_reducer.reduce(grads, variables), variables)
                return
            if not self.built:
                self.build(variables)
            self._accumulate(grads, variables)

        def _accumulate(self, grads, variables):
            """Adds this pass's gradients to the sums; every `backward_passes_per_step`-th
            pass reduces the sums over the ranks and applies them."""
            sums = [self._tutti_accumulators[self._get_variable_index(v)] for v in variables]
            for total, grad in zip(sums, grads):
                if grad is not None:
                    total.assign_add(tf.convert_to_tensor(grad))
            self._tutti_pass_count.assign_add(1)
            divisor = self._tutti_passes if self._tutti_average_passes else 1

            def update():
                local = [None if g is None else total.value / divisor
                         for total, g in zip(sums, grads)]
                super(Distributed, self).apply(self._tutti_reducer.reduce(local, variables),
                                               variables)
                for total in sums:
                    total.assign(tf.zeros_like(total.value))
                self._tutti_pass_count.assign(0)
                return tf.constant(True)

            tf.cond(self._tutti_pass_count.value >= self._tutti_passes, update,
                    lambda: tf.constant(False))

    Distributed.__name__ = base.__name__
    Distributed.__qualname__ = base.__qualname__
    Distributed.__doc__ = base.__doc__
    _SUBCLASSES[base] = Distributed
    return Distributed


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """A copy of the Keras 3 `optimizer` (same class and configuration, new variables)
    that averages the gradients over the ranks of `process_set` before applying them.
    Works with model.fit, optimizer.apply_gradients and optimizer.apply, eagerly and in
    tf.function.

    backward_passes_per_step: apply (and communicate) only every this many calls; the
        gradients of the calls in between are summed locally (averaged if
        average_aggregated_gradients) and reduced once. optimizer.iterations counts the
        updates.
    compression, sparse_as_dense, gradient_predivide_factor, op, num_groups, groups: as
        for DistributedGradientTape.
    name: the new optimizer's name (default: the original's).
    """
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError("DistributedOptimizer wraps a keras.optimizers.Optimizer, got %s"
                        % type(optimizer).__name__)
    if int(backward_passes_per_step) < 1:
        raise ValueError("backward_passes_per_step must be >= 1, got %r"
                         % (backward_passes_per_step,))
    if getattr(optimizer, "gradient_accumulation_steps", None):
        raise ValueError("use backward_passes_per_step instead of the optimizer's "
                         "gradient_accumulation_steps: the wrapper communicates once per "
                         "accumulated step")
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    distributed = _distributed_class(type(optimizer)).from_config(config)
    distributed._tutti_reducer = GradientReducer(
        device_dense, device_sparse, compression, sparse_as_dense, op,
        gradient_predivide_factor, num_groups, groups, process_set,
        scale_local_gradients=scale_local_gradients)
    distributed._tutti_passes = int(backward_passes_per_step)
    distributed._tutti_average_passes = bool(average_aggregated_gradients)
    return distributed


def broadcast_global_variables(model, root_rank, process_set=global_process_set,
                               exclude=None):
    """Copies rank `root_rank`'s model variables (and its optimizer's, once built) to
    every rank of `process_set`; `exclude(variable)` true keeps a variable local."""
    variables = list(model.variables)
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and optimizer.built:
        variables += list(optimizer.variables)
    if exclude is not None:
        variables = [v for v in variables if not exclude(v)]
    return broadcast_variables(variables, root_rank, process_set=process_set)
