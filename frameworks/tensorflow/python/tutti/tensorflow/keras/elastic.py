"""Elastic Keras training: `hvd.elastic.run`, the Keras state and callbacks that commit it
and keep its epoch and batch current (Horovod's names).

    state = hvd.elastic.KerasState(model, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        model.fit(x, y, initial_epoch=state.epoch, epochs=epochs, callbacks=[
            hvd.elastic.UpdateEpochStateCallback(state),
            hvd.elastic.UpdateBatchStateCallback(state),
            hvd.elastic.CommitStateCallback(state, batches_per_commit=10)])

After a failure fit starts again in the committed epoch, and UpdateBatchStateCallback
makes it go on from the committed batch: the batches before it are drawn from the data
but not trained on. (Horovod's callback only lowers `params["steps"]`, which fit does not
read, so Horovod trains the committed epoch again from its first batch.)
"""

import keras

from tutti.tensorflow.elastic import (  # noqa: F401
    ObjectState,
    State,
    TensorFlowKerasState,
    TensorFlowState,
    run,
)

KerasState = TensorFlowKerasState

# Set on the state while UpdateBatchStateCallback passes over committed batches, so that
# CommitStateCallback does not count them.
_SKIPPING = "_tutti_skipping_batches"


def _skipping(state):
    return getattr(state, _SKIPPING, False)


class CommitStateCallback(keras.callbacks.Callback):
    """Commits `state` every `batches_per_commit` trained batches (counted from the start
    of each epoch and of each fit) and at the end of every epoch."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        if not isinstance(batches_per_commit, int) or batches_per_commit < 1:
            raise ValueError("batches_per_commit must be a positive integer, not %r"
                             % (batches_per_commit,))
        self.state = state
        self.batches_per_commit = batches_per_commit
        self._since_commit = 0

    def on_train_begin(self, logs=None):
        self._since_commit = 0  # the same on every worker after a re-formation

    def on_train_batch_end(self, batch, logs=None):
        if _skipping(self.state):
            return
        self._since_commit += 1
        if self._since_commit >= self.batches_per_commit:
            self._since_commit = 0
            self.state.commit()

    def on_epoch_end(self, epoch, logs=None):
        self._since_commit = 0
        self.state.commit()


class UpdateBatchStateCallback(keras.callbacks.Callback):
    """Keeps `state.batch` at the number of batches finished in the current epoch, and
    resumes a re-entered fit at that batch: in the first epoch of a fit that starts with
    `state.batch` = k > 0, the first k batches are drawn from the data but not trained on
    (no step, no collective, on every worker alike), so the epoch goes on where the last
    commit left it. Needs fit's default steps_per_execution of 1 and data in the same order
    in every attempt (e.g. shuffle=False, or a seeded dataset)."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self._to_skip = 0
        self._train_function = None

    def on_train_begin(self, logs=None):
        if self._train_function is not None:  # an earlier fit ended while passing over
            self._stop_skipping()
        self._to_skip = int(getattr(self.state, "batch", 0) or 0)
        steps = int(getattr(self.model, "steps_per_execution", 1) or 1)
        if self._to_skip and steps != 1:
            raise ValueError("UpdateBatchStateCallback resumes at the committed batch only "
                             "with steps_per_execution=1, not %d" % steps)

    def on_train_batch_begin(self, batch, logs=None):
        if batch < self._to_skip:
            if self._train_function is None:
                self._train_function = self.model.train_function
                self.model.train_function = _draw_without_training
                setattr(self.state, _SKIPPING, True)
        elif self._train_function is not None:
            self._stop_skipping()

    def _stop_skipping(self):
        self.model.train_function = self._train_function
        self._train_function = None
        self._to_skip = 0
        setattr(self.state, _SKIPPING, False)

    def on_train_batch_end(self, batch, logs=None):
        if not _skipping(self.state):
            self.state.batch = batch + 1

    def on_epoch_end(self, epoch, logs=None):
        if self._train_function is not None:  # every batch of the epoch was committed
            self._stop_skipping()
        self._to_skip = 0
        self.state.batch = 0

    def on_train_end(self, logs=None):
        if self._train_function is not None:
            self._stop_skipping()


def _draw_without_training(iterator):
    """Stands in for fit's train function on a batch that was trained before the commit."""
    next(iterator)
    return {}


class UpdateEpochStateCallback(keras.callbacks.Callback):
    """Keeps `state.epoch` at the next epoch to run. Works with both ways of resuming fit:
    `initial_epoch=state.epoch` (fit counts epochs from there) and Horovod's
    `epochs=total - state.epoch` (fit counts from 0 in every attempt)."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self._offset = None

    def on_train_begin(self, logs=None):
        self._offset = None

    def on_epoch_begin(self, epoch, logs=None):
        if self._offset is None:
            self._offset = self.state.epoch - epoch

    def on_epoch_end(self, epoch, logs=None):
        self.state.epoch = self._offset + epoch + 1
