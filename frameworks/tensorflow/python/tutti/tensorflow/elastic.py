"""Elastic training for TensorFlow: `hvd.elastic.run`, `TensorFlowState`,
`TensorFlowKerasState` (Keras callbacks in tutti.tensorflow.keras.elastic).

A collective that fails because the job broke raises tf.errors.AbortedError (the core's
ABORTED status); `run` treats it as HorovodInternalError: restore the last commit, join
the next generation, sync from the agreed root. See docs/elastic.md.
"""

import tensorflow as tf

from tutti.common import elastic as _elastic
from tutti.common.elastic import ObjectState, State  # noqa: F401  (Horovod's names)
from tutti.common.exceptions import HorovodInternalError

from .functions import broadcast_, broadcast_object


def run(func):
    """Decorator: runs `func(state, ...)` to completion across failures and host changes."""

    def translated(state, *args, **kwargs):
        try:
            return func(state, *args, **kwargs)
        except (tf.errors.AbortedError, tf.errors.UnavailableError) as exc:
            raise HorovodInternalError(str(exc)) from exc

    translated.__name__ = getattr(func, "__name__", "train")
    translated.__doc__ = getattr(func, "__doc__", None)
    return _elastic.run_fn(translated, _reset)


def _reset():
    """Joins the next generation. Unnamed eager collectives are numbered from 0 again there
    (tutti.common.naming numbers per session): a worker that just started has numbered none,
    the survivors many, and the core matches requests by name (DistributedGradientTape's
    reductions are unnamed, for one)."""
    _elastic.reset()


def _broadcast_values(values, root):
    return broadcast_object(values, root_rank=root, name="tutti.elastic.objects")


class TensorFlowState(ObjectState):
    """State made of TensorFlow variables (e.g. model.variables plus optimizer.variables)
    and any picklable attributes. commit() copies the variables' values; restore()
    assigns them back; sync() broadcasts them from the root."""

    def __init__(self, variables=None, session=None, **kwargs):
        if session is not None:
            raise ValueError("TensorFlowState supports eager TensorFlow 2 only; session must "
                             "be None")
        self._state_variables = list(variables or [])
        super().__init__(bcast_object=_broadcast_values, **kwargs)

    def _variables(self):
        return self._state_variables

    def save(self):
        self._saved_values = [v.numpy().copy() for v in self._variables()]
        super().save()

    def restore(self):
        for variable, value in zip(self._variables(), self._saved_values):
            variable.assign(value)
        super().restore()

    def sync_from(self, root_rank):
        if self._variables():
            # Named: unnamed collectives are numbered per process, and a worker that just
            # joined has numbered fewer than the survivors (their names would not match).
            broadcast_(self._variables(), root_rank, name="tutti.elastic.variables")
        super().sync_from(root_rank)


class TensorFlowKerasState(TensorFlowState):
    """State of a Keras model: its variables, its optimizer's variables (the optimizer is
    built first, so a worker that never took a step holds the same variables as the
    others) and any picklable attributes (epoch, batch, ...)."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
        super().__init__(**kwargs)

    def _variables(self):
        variables = list(self.model.variables)
        if self.optimizer is not None:
            if not self.optimizer.built and self.model.built:
                self.optimizer.build(self.model.trainable_variables)
            if self.optimizer.built:
                variables += list(self.optimizer.variables)
        return variables
