"""The elastic Keras callbacks in one process (their multi-worker runs are in
test_keras_elastic.py): resuming fit at the committed batch, the epoch count in both ways
of calling fit, and the messages for bad arguments."""

import numpy as np
import pytest

import keras
import tutti.tensorflow.keras as hvd

BATCH, BATCHES = 4, 6


def data():
    rng = np.random.RandomState(0)
    x = rng.randn(BATCH * BATCHES, 3)
    return x, x.sum(axis=1, keepdims=True)


def new_model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    return model


class Trained(keras.callbacks.Callback):
    """Records the loss of every batch that fit trained (logs of a skipped batch are empty)."""

    def __init__(self):
        super().__init__()
        self.batches = []

    def on_train_batch_end(self, batch, logs=None):
        if logs:
            self.batches.append(batch)


def test_fit_resumes_at_the_committed_batch():
    x, y = data()
    model = new_model()
    state = hvd.elastic.KerasState(model, epoch=0, batch=2)
    trained = Trained()
    model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0, callbacks=[
        hvd.elastic.UpdateEpochStateCallback(state), hvd.elastic.UpdateBatchStateCallback(state),
        hvd.elastic.CommitStateCallback(state, batches_per_commit=2), trained])
    # Epoch 0 from batch 2 on, then all of epoch 1.
    assert trained.batches == [2, 3, 4, 5] + list(range(BATCHES))
    assert (state.epoch, state.batch) == (2, 0)
    # Commits after batches 3 and 5 and at the end of epoch 0; after 1, 3, 5 and the end
    # of epoch 1.
    assert state._commits == 7
    # The same weights as fitting batches 2.. of epoch 0, then the whole epoch 1.
    reference = new_model()
    reference.fit(x[2 * BATCH:], y[2 * BATCH:], batch_size=BATCH, shuffle=False, verbose=0)
    reference.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0)
    for got, want in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("horovod_style", [False, True])
def test_epoch_state_counts_from_the_committed_epoch(horovod_style):
    x, y = data()
    model = new_model()
    state = hvd.elastic.KerasState(model, epoch=2, batch=0)
    # Horovod's examples call fit(epochs=total - state.epoch), and fit counts from 0.
    epochs = dict(epochs=2) if horovod_style else dict(initial_epoch=2, epochs=4)
    model.fit(x, y, batch_size=BATCH, verbose=0, callbacks=[
        hvd.elastic.UpdateEpochStateCallback(state)], **epochs)
    assert state.epoch == 4


@pytest.mark.parametrize("value", [0, -1, 1.5])
def test_bad_batches_per_commit_is_named(value):
    state = hvd.elastic.KerasState(new_model(), epoch=0, batch=0)
    with pytest.raises(ValueError) as error:
        hvd.elastic.CommitStateCallback(state, batches_per_commit=value)
    assert str(error.value) == "batches_per_commit must be a positive integer, not %r" % value


def test_resuming_with_several_steps_per_execution_is_refused():
    x, y = data()
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", steps_per_execution=2)
    state = hvd.elastic.KerasState(model, epoch=0, batch=2)
    with pytest.raises(ValueError) as error:
        model.fit(x, y, batch_size=BATCH, verbose=0,
                  callbacks=[hvd.elastic.UpdateBatchStateCallback(state)])
    assert str(error.value) == ("UpdateBatchStateCallback resumes at the committed batch only "
                                "with steps_per_execution=1, not 2")
