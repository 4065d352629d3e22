"""A quick end-to-end check of tutti.tensorflow: a few allreduces, eagerly and inside
tf.function, plus a gradient, verified on every rank.

    mpirun -np 2 python frameworks/tensorflow/examples/allreduce_smoke.py
    tuttirun -np 2 python frameworks/tensorflow/examples/allreduce_smoke.py
"""

import sys

import numpy as np
import tensorflow as tf

import tutti.tensorflow as hvd


@tf.function
def average_and_max(x):
    # Both requests are pending at once; the core negotiates and reduces them together.
    return hvd.allreduce(x), hvd.allreduce(x, op=hvd.Max)


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    mine = tf.fill([4], float(rank + 1))
    total = float(sum(range(1, size + 1)))

    summed = hvd.allreduce(mine, op=hvd.Sum)
    averaged, largest = average_and_max(mine)
    weights = tf.Variable(mine)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(hvd.allreduce(weights * weights, op=hvd.Sum))
    gradient = tape.gradient(loss, weights)  # sum over ranks of d(loss)/d(weights)

    ok = (
        np.all(summed.numpy() == total)
        and np.allclose(averaged.numpy(), total / size)
        and np.all(largest.numpy() == size)
        and np.allclose(gradient.numpy(), size * 2.0 * (rank + 1))
    )
    mode = "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else "local"
    print("rank %d/%d (%s): sum %g, average %g, max %g, gradient %g: %s" % (
        rank, size, mode, summed[0], averaged[0], largest[0], gradient[0],
        "ok" if ok else "WRONG"), flush=True)
    hvd.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
