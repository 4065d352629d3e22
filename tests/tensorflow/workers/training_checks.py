"""Training checks (run by tensorflow_checks.py): data-parallel training on N ranks, each
with its shard of every batch, must end with the weights that training the same model on
the whole batch in one process gives (computed here on every rank as the reference).
Covers DistributedGradientTape (dense and sparse gradients, eagerly and in tf.function),
PartialDistributedGradientTape, and Keras 3 model.fit with DistributedOptimizer
(including backward_passes_per_step) and the callbacks."""

import keras
import numpy as np
import tensorflow as tf

import tutti.tensorflow as hvd
import tutti.tensorflow.keras as hvd_keras
from checking import check

GLOBAL_BATCH = 12  # divisible by 1, 2 and 3 ranks
STEPS = 3
TOLERANCE = dict(rtol=1e-5, atol=1e-6)

_rng = np.random.RandomState(0)
FEATURES = _rng.randn(GLOBAL_BATCH * STEPS, 5).astype(np.float32)
TARGETS = _rng.randn(GLOBAL_BATCH * STEPS, 1).astype(np.float32)
TOKENS = _rng.randint(0, 7, size=(GLOBAL_BATCH * STEPS, 3)).astype(np.int32)


def shard(array, step):
    """This rank's rows of global batch `step`."""
    per_rank = GLOBAL_BATCH // hvd.size()
    start = step * GLOBAL_BATCH + hvd.rank() * per_rank
    return array[start:start + per_rank]


def full(array, step):
    return array[step * GLOBAL_BATCH:(step + 1) * GLOBAL_BATCH]


def rank_shards(array):
    """This rank's rows of every global batch, in order (the data a rank's fit sees)."""
    return np.concatenate([shard(array, s) for s in range(len(array) // GLOBAL_BATCH)])


def dense_model():
    keras.utils.set_random_seed(1)
    return keras.Sequential([keras.Input((5,)), keras.layers.Dense(4, activation="tanh"),
                             keras.layers.Dense(1)])


def embedding_model():
    keras.utils.set_random_seed(2)
    return keras.Sequential([keras.Input((3,), dtype="int32"), keras.layers.Embedding(7, 2),
                             keras.layers.Flatten(), keras.layers.Dense(1)])


def weights_close(model, reference, what):
    for got, want in zip(model.get_weights(), reference.get_weights()):
        check(got.shape == want.shape and np.allclose(got, want, **TOLERANCE),
              "%s: weights %s differ from one-process training %s" % (what, got, want))


def train_with_tape(model, inputs, distributed, graph, **tape_options):
    optimizer = keras.optimizers.SGD(0.1, momentum=0.9)
    variables = model.trainable_variables

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        if distributed:
            tape = hvd.DistributedGradientTape(tape, **tape_options)
        optimizer.apply(tape.gradient(loss, variables), variables)
        return loss

    if graph:
        step = tf.function(step)
    pick = shard if distributed else full
    for s in range(STEPS):
        step(pick(inputs, s), pick(TARGETS, s))
    return model


def check_gradient_tape():
    for graph in (False, True):
        reference = train_with_tape(dense_model(), FEATURES, False, graph)
        model = dense_model()
        hvd.broadcast_variables(model.variables, root_rank=0)
        train_with_tape(model, FEATURES, True, graph)
        weights_close(model, reference, "DistributedGradientTape (graph=%s)" % graph)
    # Embedding gradients are tf.IndexedSlices: allgathered, or densified first.
    reference = train_with_tape(embedding_model(), TOKENS, False, False)
    for options in ({}, {"sparse_as_dense": True}, {"compression": hvd.Compression.none,
                                                    "num_groups": 2}):
        model = train_with_tape(embedding_model(), TOKENS, True, False, **options)
        weights_close(model, reference, "DistributedGradientTape %s" % options)


def check_partial_tape():
    model = dense_model()
    local_layer = model.layers[0]
    x, y = shard(FEATURES, 0), shard(TARGETS, 0)

    def gradients(tape_factory):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        return tape_factory(tape).gradient(loss, model.trainable_variables)

    local = gradients(lambda tape: tape)
    partial = gradients(lambda tape: hvd.PartialDistributedGradientTape(
        tape, local_layers=local_layer))
    averaged = [hvd.allreduce(g) for g in local]
    for variable, got, mine, mean in zip(model.trainable_variables, partial, local, averaged):
        is_local = any(variable is v for v in local_layer.trainable_weights)
        want = mine / hvd.size() if is_local else mean
        check(np.allclose(got.numpy(), want.numpy(), **TOLERANCE),
              "PartialDistributedGradientTape %s (local=%s)" % (variable.path, is_local))


class LearningRateLog(keras.callbacks.Callback):
    """Records the learning rate each batch starts with."""

    def __init__(self):
        super().__init__()
        self.rates = []

    def on_train_batch_begin(self, batch, logs=None):
        self.rates.append(float(np.asarray(self.model.optimizer.learning_rate)))


def fit(model, optimizer, distributed, epochs=2, callbacks=()):
    model.compile(optimizer=optimizer, loss="mse")
    x = rank_shards(FEATURES) if distributed else FEATURES
    y = rank_shards(TARGETS) if distributed else TARGETS
    batch = GLOBAL_BATCH // hvd.size() if distributed else GLOBAL_BATCH
    return model.fit(x, y, batch_size=batch, epochs=epochs, shuffle=False, verbose=0,
                     callbacks=list(callbacks))


def check_keras_fit():
    size = hvd.size()
    reference = dense_model()
    reference_history = fit(reference, keras.optimizers.SGD(0.1, momentum=0.9), False)
    model = dense_model()
    optimizer = hvd_keras.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9))
    check(isinstance(optimizer, keras.optimizers.SGD) and optimizer.momentum == 0.9,
          "DistributedOptimizer keeps the optimizer's class and configuration")
    history = fit(model, optimizer, True, callbacks=[
        hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd_keras.callbacks.MetricAverageCallback()])
    weights_close(model, reference, "model.fit with DistributedOptimizer")
    check(int(optimizer.iterations) == 2 * STEPS, "iterations %d" % int(optimizer.iterations))
    # MetricAverageCallback: the averaged shard losses are the whole batch's loss.
    losses = history.history["loss"]
    check(np.allclose(losses, reference_history.history["loss"], rtol=1e-5),
          "averaged loss %s vs one-process loss %s" % (losses, reference_history.history["loss"]))
    check(hvd.allgather_object(losses) == [losses] * size, "every rank logs the same loss")

    # backward_passes_per_step: two local passes, one reduction and one update.
    reference = dense_model()
    fit(reference, keras.optimizers.SGD(0.1, gradient_accumulation_steps=2), False)
    model = dense_model()
    optimizer = hvd_keras.DistributedOptimizer(keras.optimizers.SGD(0.1),
                                               backward_passes_per_step=2,
                                               average_aggregated_gradients=True)
    fit(model, optimizer, True, callbacks=[hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0)])
    weights_close(model, reference, "backward_passes_per_step=2")
    check(int(optimizer.iterations) == STEPS, "updates with backward_passes_per_step=2: %d"
          % int(optimizer.iterations))


def check_learning_rate_callbacks():
    size = hvd.size()
    log = LearningRateLog()
    warmup = hvd_keras.callbacks.LearningRateWarmupCallback(initial_lr=0.3, warmup_epochs=2)
    schedule = hvd_keras.callbacks.LearningRateScheduleCallback(
        initial_lr=0.3, multiplier=lambda epoch: 0.5, start_epoch=2)
    optimizer = hvd_keras.DistributedOptimizer(keras.optimizers.SGD(0.3))
    fit(dense_model(), optimizer, True, epochs=3, callbacks=[warmup, schedule, log])
    progress = [(e + b / STEPS) for e in range(2) for b in range(STEPS)]
    want = [0.3 / size * (p * (size - 1) / 2 + 1) for p in progress] + [0.15] * STEPS
    check(np.allclose(log.rates, want, rtol=1e-6), "learning rates %s, expected %s"
          % (log.rates, want))


def main():
    check_gradient_tape()
    check_partial_tape()
    check_keras_fit()
    check_learning_rate_callbacks()
