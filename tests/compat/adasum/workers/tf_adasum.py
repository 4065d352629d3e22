"""tutti.tensorflow with op=hvd.Adasum against the float64 numpy reference: allreduce (eager
and in tf.function), grouped_allreduce, its gradient, DistributedGradientTape and the Keras
DistributedOptimizer (both Adasum the gradients, as Horovod does), and Horovod's refusals
(sparse tensors, a number of ranks that is not a power of two)."""

import sys

import numpy as np
import tensorflow as tf

import tutti.tensorflow as hvd
import tutti.tensorflow.keras as hvd_keras
from adasum_reference import adasum, check, tensor


def say(text):
    print(text, flush=True)


def collectives(rank, size):
    for dtype in (np.float16, np.float32, np.float64):
        per_rank = [tensor(r, (4, 6), dtype, 30) for r in range(size)]
        got = hvd.allreduce(tf.constant(per_rank[rank]), op=hvd.Adasum, name="ar.%s" % dtype)
        check(got.numpy(), per_rank, "allreduce %s" % np.dtype(dtype).name)
    groups = [[tensor(r, (n,), np.float32, 40 + n) * np.float32(10.0 ** n) for r in range(size)]
              for n in (2, 5)]
    got = hvd.grouped_allreduce([tf.constant(g[rank]) for g in groups], op=hvd.Adasum)
    for g, result in zip(groups, got):
        check(result.numpy(), g, "grouped_allreduce")

    @tf.function
    def in_graph(x):
        return hvd.allreduce(x, op=hvd.Adasum, name="in.graph")

    check(in_graph(tf.constant(groups[0][rank])).numpy(), groups[0], "tf.function")

    x = tf.Variable(groups[0][rank])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(hvd.allreduce(x, op=hvd.Adasum, name="grad") * 3.0)
    grad = tape.gradient(y, x)  # Adasum of identical gradients: themselves
    assert np.allclose(grad.numpy(), 3.0), grad


def gradients(rank, size):
    per_rank = [tensor(r, (5,), np.float32, 50) for r in range(size)]
    weights = tf.Variable(np.ones(5, np.float32))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(weights * tf.constant(per_rank[rank]))
    tape = hvd.DistributedGradientTape(tape, op=hvd.Adasum)
    (grad,) = tape.gradient(loss, [weights])
    check(grad.numpy(), per_rank, "DistributedGradientTape")

    import keras
    optimizer = hvd_keras.DistributedOptimizer(keras.optimizers.SGD(1.0), op=hvd.Adasum)
    variable = tf.Variable(np.zeros(5, np.float32))
    optimizer.apply_gradients([(tf.constant(per_rank[rank]), variable)])
    check(-variable.numpy(), per_rank, "keras DistributedOptimizer")


def refusals(rank, size):
    slices = tf.IndexedSlices(tf.ones((1, 3)), tf.constant([0]), tf.constant([4, 3]))
    try:
        hvd.allreduce(slices, op=hvd.Adasum)
        raise AssertionError("an IndexedSlices Adasum was accepted")
    except NotImplementedError as e:
        assert "sparse_as_dense=True" in str(e), e


def refused_on_odd_counts(rank, size):
    try:
        hvd.allreduce(tf.ones(3), op=hvd.Adasum)
        raise AssertionError("Adasum on %d ranks was accepted" % size)
    except NotImplementedError as e:
        assert str(e) == "Running Adasum with non-power of 2 ranks is not supported yet.", e


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    if size & (size - 1):
        checks = [refused_on_odd_counts]
    else:
        checks = [collectives, gradients, refusals]
    for run in checks:
        try:
            run(rank, size)
        except Exception as e:
            say("rank %d/%d: FAIL %s: %s: %s" % (rank, size, run.__name__, type(e).__name__, e))
            sys.exit(1)
        say("rank %d/%d: ok %s" % (rank, size, run.__name__))
    say("rank %d/%d: ALL OK" % (rank, size))


if __name__ == "__main__":
    main()
