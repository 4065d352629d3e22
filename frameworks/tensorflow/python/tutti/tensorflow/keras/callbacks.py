"""Keras 3 callbacks for distributed training, with Horovod's names and arguments."""

import os

import keras
import numpy as np
import tensorflow as tf
from tutti.common import basics

from ..reductions import grouped_allreduce
from .optimizer import broadcast_global_variables


def _variable_list(local_variables):
    """Horovod's accepted forms: None, one variable, or a collection of variables."""
    variable_types = (tf.Variable, keras.Variable)
    if local_variables is None:
        return []
    if isinstance(local_variables, variable_types):
        return [local_variables]
    local_variables = list(local_variables)
    if not all(isinstance(v, variable_types) for v in local_variables):
        raise ValueError("All local variables must be of tf.Variable type.")
    return local_variables


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Copies rank `root_rank`'s model and optimizer variables to every rank when
    training starts, so that all replicas start alike. The optimizer is built first if
    needed; one that cannot be built yet (a model built by its first batch) is broadcast
    after the first batch.

    local_variables: a variable or variables that stay as each rank has them (e.g. the
        weights of model-parallel layers); more with register_local_var(var)."""

    def __init__(self, root_rank, device="", local_variables=None):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.broadcast_done = False
        self._local_refs = set()
        for variable in _variable_list(local_variables):
            self.register_local_var(variable)

    def register_local_var(self, var):
        """Excludes `var` from the broadcast."""
        self._local_refs.add(id(var))

    def _broadcast(self):
        with tf.device(self.device):
            broadcast_global_variables(self.model, self.root_rank,
                                       exclude=lambda v: id(v) in self._local_refs)
        optimizer = getattr(self.model, "optimizer", None)
        self.broadcast_done = optimizer is None or optimizer.built

    def on_train_begin(self, logs=None):
        if self.broadcast_done:
            return
        # Build the optimizer now: broadcasting its variables after a step has begun to
        # fill them (e.g. gradient accumulators) would overwrite local state.
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is not None and not optimizer.built and self.model.built:
            optimizer.build(self.model.trainable_variables)
        self._broadcast()

    def on_train_batch_end(self, batch, logs=None):
        if not self.broadcast_done:
            self._broadcast()


class MetricAverageCallback(keras.callbacks.Callback):
    """Replaces the epoch's metrics in `logs` by their average over the ranks (in one
    request), so that what is printed and what later callbacks see (checkpointing, early
    stopping, learning-rate schedules) agree on every rank. Put it before those
    callbacks."""

    def __init__(self, device=""):
        super().__init__()
        self.device = device

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        names = sorted(k for k, v in logs.items() if np.ndim(v) == 0 and
                       isinstance(np.asarray(v).item(), (int, float)))
        if not names:
            return
        with tf.device(self.device):
            values = [tf.constant(float(np.asarray(logs[k]).item()), tf.float64) for k in names]
            averaged = grouped_allreduce(values, name="tutti.metric_average.%d" % epoch)
        for name, value in zip(names, averaged):
            logs[name] = float(value)


def _steps(callback, steps_per_epoch):
    steps = steps_per_epoch or (callback.params or {}).get("steps")
    if not steps:
        raise ValueError("%s needs steps_per_epoch: Keras does not know the number of "
                         "steps of an epoch here" % type(callback).__name__)
    return steps


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the learning rate to initial_lr * multiplier from epoch `start_epoch` up to
    (excluding) `end_epoch`.

    multiplier: a number, or a function of the epoch (a float with staircase=False,
        which then changes the rate every batch).
    momentum_correction: accepted for Horovod compatibility; Keras 3 optimizers keep
        momentum as a constant, so it has no effect.
    """

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None, verbose=0):
        super().__init__()
        self.initial_lr = float(initial_lr)
        self.multiplier = multiplier if callable(multiplier) else (lambda epoch: multiplier)
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.verbose = verbose
        self.current_epoch = 0

    def _in_range(self, epoch):
        return epoch >= self.start_epoch and (self.end_epoch is None or epoch < self.end_epoch)

    def _set(self, rate):
        self.model.optimizer.learning_rate = rate

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch
        if self._in_range(epoch) and self.staircase:
            self._set(self.initial_lr * self.multiplier(epoch))

    def on_train_batch_begin(self, batch, logs=None):
        if self._in_range(self.current_epoch) and not self.staircase:
            epoch = self.current_epoch + batch / _steps(self, self.steps_per_epoch)
            self._set(self.initial_lr * self.multiplier(epoch))

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = float(np.asarray(self.model.optimizer.learning_rate))


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Raises the learning rate from initial_lr / size to initial_lr over the first
    `warmup_epochs` epochs, a little every batch (Goyal et al., "Accurate, Large
    Minibatch SGD"): large learning rates scaled by the number of ranks are unstable at
    the start of training."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        size = basics.size()

        def multiplier(epoch):
            return 1.0 / size * (epoch * (size - 1) / warmup_epochs + 1)

        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs,
                         staircase=False, momentum_correction=momentum_correction,
                         steps_per_epoch=steps_per_epoch, verbose=verbose)
        self.warmup_epochs = warmup_epochs

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.warmup_epochs - 1:
            self._set(self.initial_lr)
            if self.verbose and basics.rank() == 0:
                print("\nEpoch %d: finished the learning rate warmup to %g."
                      % (epoch + 1, self.initial_lr))
        super().on_epoch_end(epoch, logs)


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """ModelCheckpoint that saves only the best model so far (save_best_only=True), as in
    Horovod. Its filepath is set after construction (callback.filepath = "best.keras",
    Horovod's estimators do so); training without one raises ValueError."""

    def __init__(self, monitor="val_loss", verbose=0, save_weights_only=False, mode="auto",
                 save_freq="epoch"):
        # Keras checks the file extension when constructed: satisfy it, then unset it.
        placeholder = "unset.weights.h5" if save_weights_only else "unset.keras"
        super().__init__(filepath=placeholder, monitor=monitor, verbose=verbose,
                         save_best_only=True, save_weights_only=save_weights_only,
                         mode=mode, save_freq=save_freq)
        self.filepath = None

    def on_train_begin(self, logs=None):
        if self.filepath is None:
            raise ValueError("BestModelCheckpoint has no filepath: set callback.filepath "
                             "(e.g. to %r) before training" % "best.keras")
        self.filepath = os.fspath(self.filepath)
        parent = getattr(super(), "on_train_begin", None)
        if parent is not None:
            parent(logs)
