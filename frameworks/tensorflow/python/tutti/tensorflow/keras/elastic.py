"""Elastic Keras training: `hvd.elastic.run`, the Keras state and callbacks that commit it
and keep its epoch and batch current (Horovod's names).

    state = hvd.elastic.KerasState(model, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        model.fit(x, y, initial_epoch=state.epoch, epochs=epochs, callbacks=[
            hvd.elastic.UpdateEpochStateCallback(state),
            hvd.elastic.UpdateBatchStateCallback(state),
            hvd.elastic.CommitStateCallback(state, batches_per_commit=10)])

After a failure fit starts again at the committed epoch (its batches from the first).
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


class CommitStateCallback(keras.callbacks.Callback):
    """Commits `state` every `batches_per_commit` batches and at the end of every epoch."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        self.state = state
        self.batches_per_commit = batches_per_commit
        self._since_commit = 0

    def on_train_batch_end(self, batch, logs=None):
        self._since_commit += 1
        if self._since_commit >= self.batches_per_commit:
            self._since_commit = 0
            self.state.commit()

    def on_epoch_end(self, epoch, logs=None):
        self._since_commit = 0
        self.state.commit()


class UpdateBatchStateCallback(keras.callbacks.Callback):
    """Keeps `state.batch` at the number of batches finished in the current epoch."""

    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_train_batch_end(self, batch, logs=None):
        self.state.batch = batch + 1

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallback(keras.callbacks.Callback):
    """Keeps `state.epoch` at the next epoch to run (fit's initial_epoch after a reset)."""

    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_epoch_end(self, epoch, logs=None):
        self.state.epoch = epoch + 1
