"""Horovod 0.28.1 behaviour of tutti.tensorflow's training helpers (run by
horovod_tf_checks.py on every rank): local (model-parallel) gradients in
PartialDistributedGradientTape and the Keras DistributedOptimizer, the DistributedOptimizer
for tf.compat.v1 optimizers, SyncBatchNormalization, and the Keras load_model,
BestModelCheckpoint and BroadcastGlobalVariablesCallback(local_variables=...)."""

import os
import tempfile

import keras
import numpy as np
import tensorflow as tf

import tutti.tensorflow as hvd
import tutti.tensorflow.keras as hvd_keras
from checking import check, expect_error

TOLERANCE = dict(rtol=1e-5, atol=1e-6)


def rank_data(rows=4, columns=3, salt=0):
    """Rows that differ between ranks."""
    rng = np.random.RandomState(100 * hvd.rank() + salt)
    return rng.randn(rows, columns).astype(np.float32)


def two_layer_model():
    keras.utils.set_random_seed(7)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="shared"),
                             keras.layers.Dense(1, name="local")])


def local_gradients(model, x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x) ** 2)
    return tape.gradient(loss, model.trainable_variables)


def expected_gradients(model, x, local_layer, op):
    """Horovod: shared gradients reduced with `op`; local ones divided by the set size
    (scale_local_gradients) whatever the op."""
    size = hvd.size()
    own = local_gradients(model, x)
    local_ids = {id(v) for v in local_layer.trainable_weights}
    return [g.numpy() / size if id(v) in local_ids else hvd.allreduce(g, op=op).numpy()
            for v, g in zip(model.trainable_variables, own)]


def check_partial_tape():
    model = two_layer_model()
    local_layer = model.get_layer("local")
    x = rank_data()
    for op in (hvd.Average, hvd.Sum):
        want = expected_gradients(model, x, local_layer, op)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x) ** 2)
        tape = hvd.PartialDistributedGradientTape(tape, op=op, local_layers=[local_layer])
        got = tape.gradient(loss, model.trainable_variables)
        for g, w, v in zip(got, want, model.trainable_variables):
            check(np.allclose(g.numpy(), w, **TOLERANCE),
                  "PartialDistributedGradientTape(op=%s) %s: %s vs %s" % (op.name, v.path, g, w))
    expect_error(ValueError, lambda: hvd.PartialDistributedGradientTape(
        tf.GradientTape(), local_layers=["not a layer"]), "tf.keras.layers.Layer")


def check_tape_forms():
    """Horovod's tape is a tf.GradientTape (of the wrapped tape's class); it may also be
    entered directly, and a persistent one answers more than once."""
    size, rank = hvd.size(), hvd.rank()
    variable = tf.Variable(1.0)
    mean_weight = sum(r + 1.0 for r in range(size)) / size
    with hvd.DistributedGradientTape(tf.GradientTape(persistent=True)) as tape:
        loss = variable * (rank + 1.0)
    check(isinstance(tape, tf.GradientTape), "DistributedGradientTape is a tf.GradientTape")
    for _ in range(2):
        got = tape.gradient(loss, [variable])
        check(np.isclose(float(got[0]), mean_weight), "entered tape gradient %s" % got)
    if size > 1:
        # Horovod: a rank outside the tape's process set keeps its own gradients.
        first = hvd.add_process_set([0])
        with tf.GradientTape() as tape:
            loss = variable * (rank + 1.0)
        got = hvd.DistributedGradientTape(tape, process_set=first).gradient(loss, [variable])
        check(np.isclose(float(got[0]), rank + 1.0), "gradient outside the set %s" % got)
        hvd.remove_process_set(first)


def check_keras_local_variables():
    """A model-parallel Keras model: the optimizer's register_local_var keeps the local
    layer's gradients local (divided by the set size), the rest averaged."""
    model = two_layer_model()
    local_layer = model.get_layer("local")
    x = rank_data(salt=1)
    want = expected_gradients(model, x, local_layer, hvd.Average)
    before = [v.numpy() for v in model.trainable_variables]
    optimizer = hvd_keras.DistributedOptimizer(keras.optimizers.SGD(1.0))
    for variable in local_layer.trainable_weights:
        optimizer.register_local_var(variable)
    optimizer.apply(local_gradients(model, x), model.trainable_variables)
    for b, w, v in zip(before, want, model.trainable_variables):
        check(np.allclose(v.numpy(), b - w, **TOLERANCE),
              "register_local_var: %s moved by %s, expected %s" % (v.path, b - v.numpy(), w))


def check_legacy_optimizer():
    """hvd.DistributedOptimizer around a tf.compat.v1 optimizer averages the gradients of
    compute_gradients() (and so of minimize()), eagerly and in a session."""
    size, rank = hvd.size(), hvd.rank()
    variable = tf.Variable([1.0, 2.0])
    optimizer = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.5))
    check(isinstance(optimizer, tf.compat.v1.train.Optimizer), "a tf.compat.v1 optimizer")
    optimizer.minimize(lambda: tf.reduce_sum(variable) * (rank + 1.0), var_list=[variable])
    mean_weight = sum(r + 1.0 for r in range(size)) / size
    check(np.allclose(variable.numpy(), [1.0 - 0.5 * mean_weight, 2.0 - 0.5 * mean_weight]),
          "legacy DistributedOptimizer.minimize: %s" % variable.numpy())
    local = tf.Variable([0.0])
    optimizer.register_local_var(local)
    pairs = optimizer.compute_gradients(
        lambda: tf.reduce_sum(variable) * (rank + 1.0) + local[0] * (rank + 1.0),
        var_list=[variable, local])
    check(np.allclose(pairs[0][0].numpy(), mean_weight) and
          np.allclose(pairs[1][0].numpy(), (rank + 1.0) / size),
          "legacy compute_gradients with a local variable: %s" % pairs)
    expect_error(ValueError, lambda: hvd.DistributedOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.1), backward_passes_per_step=2),
        "backward_passes_per_step")
    expect_error(ValueError, lambda: hvd.DistributedOptimizer(object()), "optimizer")
    graph = tf.Graph()
    with graph.as_default():
        weight = tf.compat.v1.get_variable("w", initializer=[3.0], use_resource=True)
        loss = weight[0] * (rank + 1.0)
        opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0))
        step = opt.minimize(loss)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(step)
            got = session.run(weight)
    check(np.allclose(got, [3.0 - mean_weight]), "legacy optimizer in a session: %s" % got)
    # Keras optimizers go to tutti.tensorflow.keras.DistributedOptimizer.
    wrapped = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1))
    check(isinstance(wrapped, keras.optimizers.SGD) and
          getattr(wrapped, "_tutti_distributed", False), "Keras optimizer wrapped for Keras")


def check_sync_batch_norm():
    """Training statistics are those of every rank's batch together."""
    size = hvd.size()
    x = rank_data(rows=6, columns=2, salt=2)
    everything = np.concatenate([np.random.RandomState(100 * r + 2).randn(6, 2)
                                 for r in range(size)]).astype(np.float32)
    layer = hvd.SyncBatchNormalization(momentum=0.0, epsilon=1e-3, center=False, scale=False)
    out = layer(x, training=True).numpy()
    mean, variance = everything.mean(0), everything.var(0)
    want = (x - mean) / np.sqrt(variance + 1e-3)
    check(np.allclose(out, want, rtol=1e-4, atol=1e-5), "SyncBatchNormalization output")
    check(np.allclose(layer.moving_mean.numpy(), mean, rtol=1e-4, atol=1e-5) and
          np.allclose(layer.moving_variance.numpy(), variance, rtol=1e-4, atol=1e-5),
          "SyncBatchNormalization moving statistics")
    check(layer.name.startswith("sync_batch_normalization"), "default name %s" % layer.name)
    expect_error(ValueError, lambda: hvd.SyncBatchNormalization(fused=True), "fused")


def small_model():
    keras.utils.set_random_seed(3)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, name="hidden"),
                             keras.layers.Dense(1, name="out")])


def weights_agree(model, what):
    for weight in model.get_weights():
        gathered = hvd.allgather(tf.constant(weight[None]))
        check(all(np.allclose(g, weight) for g in gathered.numpy()),
              "%s: weights differ between ranks" % what)


def check_keras_callbacks_and_loading():
    rank = hvd.rank()
    x, y = rank_data(rows=8, salt=3), rank_data(rows=8, columns=1, salt=4)
    # local_variables: that variable keeps each rank's value; the rest is the root's.
    model = small_model()
    local_kernel = model.get_layer("hidden").kernel
    local_kernel.assign(tf.fill(local_kernel.shape, float(rank)))
    model.compile(optimizer=hvd_keras.DistributedOptimizer(keras.optimizers.SGD(0.0)),
                  loss="mse")
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[
        hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0, local_variables=local_kernel)])
    check(np.all(local_kernel.numpy() == rank), "local variable kept its rank's value")
    expect_error(ValueError, lambda: hvd_keras.callbacks.BroadcastGlobalVariablesCallback(
        0, local_variables=[1.0]), "tf.Variable")
    # BestModelCheckpoint: save_best_only, filepath set afterwards.
    directory = tempfile.mkdtemp(prefix="tutti-compat-%d-" % rank)
    best = hvd_keras.callbacks.BestModelCheckpoint(monitor="loss")
    check(best.save_best_only and best.filepath is None, "BestModelCheckpoint defaults")
    model = small_model()
    model.compile(optimizer=hvd_keras.DistributedOptimizer(keras.optimizers.SGD(0.01)),
                  loss="mse")
    expect_error(ValueError, lambda: model.fit(x, y, epochs=1, verbose=0, callbacks=[best]),
                 "filepath")
    best.filepath = os.path.join(directory, "best.keras")
    model.fit(x, y, batch_size=4, epochs=2, verbose=0, callbacks=[
        hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0), best])
    check(os.path.exists(best.filepath), "BestModelCheckpoint wrote %s" % best.filepath)
    # load_model: the optimizer comes back distributed, with its state.
    momentum = small_model()
    momentum.compile(optimizer=hvd_keras.DistributedOptimizer(
        keras.optimizers.SGD(0.01, momentum=0.9)), loss="mse")
    momentum.fit(x, y, batch_size=4, epochs=1, verbose=0,
                 callbacks=[hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0)])
    path = os.path.join(directory, "model.keras")
    momentum.save(path)
    loaded = hvd_keras.load_model(path)
    optimizer = loaded.optimizer
    check(isinstance(optimizer, keras.optimizers.SGD) and
          getattr(optimizer, "_tutti_distributed", False) and
          int(optimizer.iterations) == int(momentum.optimizer.iterations) and
          np.isclose(float(optimizer.momentum), 0.9),
          "load_model restored %s (iterations %s)" % (type(optimizer), optimizer.iterations))
    loaded.fit(x, y, batch_size=4, epochs=1, verbose=0)
    weights_agree(loaded, "training after load_model")


def main():
    check_partial_tape()
    check_tape_forms()
    check_keras_local_variables()
    check_legacy_optimizer()
    check_sync_batch_norm()
    check_keras_callbacks_and_loading()
