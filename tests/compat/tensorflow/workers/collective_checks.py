"""Horovod 0.28.1 behaviour of the tutti.tensorflow collectives (run by
horovod_tf_checks.py on every rank): the names scripts import, alltoall's return types and
even split, the gradients of broadcast, reducescatter and grouped_allgather as Horovod
defines them, IndexedSlices averages and errors, the object collectives in graphs, in-place
broadcasts, process-set ops and the exception types."""

import numpy as np
import tensorflow as tf

import tutti.tensorflow as hvd
from checking import check, expect_error

FLOATS = (tf.float32, tf.float64)


def check_names():
    """Every name this package adds for Horovod scripts is importable where they look."""
    from tutti.tensorflow.mpi_ops import (  # noqa: F401  (Horovod's module path)
        Average, ProcessSet, Sum, _allreduce, _grouped_allreduce, _grouped_reducescatter,
        _reducescatter, add_process_set, allgather, alltoall, broadcast, broadcast_,
        global_process_set, grouped_allgather, init, join, local_rank_op, local_size_op,
        process_set_included_op, rank, rank_op, remove_process_set, size, size_op)
    import tutti.tensorflow.keras as hvd_keras

    for name in ("broadcast_", "broadcast_object_fn", "process_set_included_op",
                 "SyncBatchNormalization", "DistributedOptimizer", "broadcast_variables",
                 "broadcast_global_variables"):
        check(hasattr(hvd, name), "tutti.tensorflow has no %s" % name)
    for name in ("load_model", "DistributedOptimizer", "broadcast_variables"):
        check(hasattr(hvd_keras, name), "tutti.tensorflow.keras has no %s" % name)
    check(hasattr(hvd_keras.callbacks, "BestModelCheckpoint"), "no BestModelCheckpoint")
    # horovod.tensorflow.keras's collectives take a tensor-like value, then its name.
    check(np.array_equal(hvd_keras.allreduce([1.0, 2.0], "compat.keras", op=hvd.Sum).numpy(),
                         [hvd.size(), 2.0 * hvd.size()]), "keras allreduce(value, name)")
    check(int(hvd_keras.broadcast(hvd.rank(), 0, "compat.keras.bcast")) == 0,
          "keras broadcast(value, root_rank, name)")
    # The low-level helpers default to Sum, as in Horovod.
    size = hvd.size()
    check(float(_allreduce(tf.constant(1.0))) == size, "mpi_ops._allreduce sums")
    check(float(_grouped_allreduce([tf.constant(2.0)])[0]) == 2.0 * size,
          "mpi_ops._grouped_allreduce sums")
    part = _reducescatter(tf.ones([size, 2]))
    check(part.shape == (1, 2) and np.all(part.numpy() == size), "mpi_ops._reducescatter")


# ---- alltoall ----------------------------------------------------------------------------

def check_alltoall():
    size, rank = hvd.size(), hvd.rank()
    # Without splits: the received tensor alone, the first dimension split as evenly as it
    # goes, the first `rows % size` ranks one row more.
    rows = 2 * size + 1
    counts = [rows // size + (1 if r < rows % size else 0) for r in range(size)]
    start = sum(counts[:rank])
    for dim in (1, 2):
        data = np.arange(rows, dtype=np.float32) + 100 * rank
        tensor = tf.constant(data.reshape([rows] + [1] * (dim - 1)))
        for where, run in (("eager", lambda t: hvd.alltoall(t)),
                           ("tf.function", tf.function(lambda t: hvd.alltoall(t)))):
            received = run(tensor)
            check(isinstance(received, tf.Tensor), "alltoall without splits (%s) returned %s"
                  % (where, type(received).__name__))
            want = np.concatenate([np.arange(start, start + counts[rank]) + 100 * r
                                   for r in range(size)])
            check(received.shape[0] == len(want) and
                  np.array_equal(received.numpy().reshape(-1), want),
                  "alltoall uneven split (%s): %s vs %s" % (where, received, want))
    # With splits, also as a float tensor: (received, received_splits).
    splits = tf.constant([rank + 1.0] * size)
    values = tf.constant(sum([[j] * (rank + 1) for j in range(size)], []), tf.int32)
    result = hvd.alltoall(values, splits)
    check(isinstance(result, tuple) and len(result) == 2, "alltoall with splits: a pair")
    received, received_splits = result
    check(np.all(received.numpy() == rank) and
          received_splits.numpy().tolist() == [r + 1 for r in range(size)],
          "alltoall with float splits: %s %s" % (received, received_splits))


# ---- gradients ---------------------------------------------------------------------------

def check_broadcast_gradient():
    """Horovod: the root gets the average of the output gradients, the others zeros;
    eagerly, inside tf.function and in a TF1 graph run by a session (where the zeros must
    still take part in the allreduce, or the root waits forever)."""
    size, rank = hvd.size(), hvd.rank()
    for dtype in FLOATS:
        for root in range(size):
            want = np.ones([5]) * (1 if rank == root else 0)
            source = tf.Variable(tf.ones([5]) * rank)
            with tf.GradientTape() as tape:
                tensor = tf.cast(source, dtype)
                out = hvd.broadcast(tensor, root)
            got = tape.gradient(out, tensor)
            check(np.allclose(got.numpy(), want), "eager broadcast gradient %s" % got)

            @tf.function
            def traced():
                with tf.GradientTape() as tape:
                    tensor = tf.cast(source, dtype)
                    tape.watch(tensor)
                    out = hvd.broadcast(tensor, root)
                return tape.gradient(out, tensor)

            check(np.allclose(traced().numpy(), want), "tf.function broadcast gradient")
    graph = tf.Graph()
    with graph.as_default():
        tensor = tf.ones([5]) * rank
        out = hvd.broadcast(tensor, 0)
        grad = tf.gradients(out, tensor, tf.ones([5]))[0]
        with tf.compat.v1.Session(graph=graph) as session:
            got = session.run(grad)
    check(np.allclose(got, 1.0 if rank == 0 else 0.0), "session broadcast gradient %s" % got)


def check_reducescatter_gradient():
    """Horovod: allgather of the part gradients, times the set size for Sum."""
    size = hvd.size()
    for dtype in FLOATS:
        for op, factor in ((hvd.Sum, size), (hvd.Average, 1)):
            tensor = tf.Variable(tf.random.uniform([size * 4, 3], dtype=dtype))
            with tf.GradientTape() as tape:
                part = hvd.reducescatter(tensor, op=op)
            got = tape.gradient(part, tensor, tf.ones([4, 3], dtype))
            check(np.allclose(got.numpy(), factor), "reducescatter %s gradient %s"
                  % (op.name, got.numpy()[0]))
            a = tf.Variable(tf.ones([size * 2], dtype))
            b = tf.Variable(tf.ones([size, 2], dtype))
            with tf.GradientTape() as tape:
                parts = hvd.grouped_reducescatter([a, b], op=op)
            got = tape.gradient(parts, [a, b])
            check(all(np.allclose(g.numpy(), factor) for g in got),
                  "grouped_reducescatter %s gradient %s" % (op.name, got))


def check_grouped_allgather_gradient():
    size, rank = hvd.size(), hvd.rank()
    for dtype in FLOATS:
        tensors = [tf.Variable(tf.ones([rank + 1, 2], dtype)),
                   tf.Variable(tf.ones([2], dtype))]
        with tf.GradientTape() as tape:
            gathered = hvd.grouped_allgather(tensors)
            loss = tf.reduce_sum(gathered[0]) * 3.0  # the second output is unused
        got = tape.gradient(loss, tensors)
        check(got[0].dtype == dtype and np.allclose(got[0].numpy(), 3.0),
              "grouped_allgather %s gradient %s" % (dtype.name, got[0]))
        # Horovod's own test: float32 output gradients for each output on its own.
        sources = [tf.Variable(tf.ones([rank + 1, 2]) * rank) for _ in range(3)]
        with tf.GradientTape(persistent=True) as tape:
            tensors = [tf.cast(t, dtype) for t in sources]
            gathered = hvd.grouped_allgather(tensors)
        grad_ys = tf.concat([tf.ones([r + 1, 2]) * r for r in range(size)], axis=0)
        for out, tensor in zip(gathered, tensors):
            got = tape.gradient(out, tensor, grad_ys)
            check(np.allclose(got.numpy(), rank), "grouped_allgather %s gradient with float32 "
                  "output gradients: %s" % (dtype.name, got))


# ---- IndexedSlices -----------------------------------------------------------------------

def check_indexed_slices():
    size = hvd.size()
    for dtype, result_dtype in ((tf.int8, tf.float32), (tf.uint8, tf.float32),
                                (tf.int16, tf.float32), (tf.int32, tf.float64),
                                (tf.float16, tf.float16)):
        slices = tf.IndexedSlices(tf.cast(tf.fill([2, 3], 2), dtype), tf.constant([0, 2]),
                                  tf.constant([4, 3]))
        averaged = hvd.allreduce(slices, op=hvd.Average)
        check(isinstance(averaged, tf.IndexedSlices) and averaged.values.dtype == result_dtype
              and np.allclose(averaged.values.numpy(), 2.0 / size),
              "IndexedSlices Average of %s: %s" % (dtype.name, averaged.values))
    slices = tf.IndexedSlices(tf.ones([1, 2]), tf.constant([1]), tf.constant([3, 2]))
    for op in (hvd.Min, hvd.Max, hvd.Product):
        expect_error(NotImplementedError, lambda: hvd.allreduce(slices, op=op),
                     "Only Sum and Average")
        expect_error(NotImplementedError, lambda: hvd.grouped_allreduce([slices], op=op),
                     "Only Sum and Average")
    expect_error(NotImplementedError, lambda: hvd.allreduce(slices, prescale_factor=2.0),
                 "Pre/postscale_factor")
    expect_error(NotImplementedError, lambda: hvd.allreduce(slices, postscale_factor=0.5),
                 "Pre/postscale_factor")


# ---- objects and variables ------------------------------------------------------------

def check_objects():
    size, rank = hvd.size(), hvd.rank()
    root = size - 1
    obj = {"from": rank, "scale": lambda x: x * (rank + 1)}  # cloudpickle: lambdas travel

    @tf.function
    def traced():
        got = hvd.broadcast_object(obj, root_rank=root)
        gathered = hvd.allgather_object(rank * 10)
        return tf.constant(got["from"]), tf.constant(gathered)

    sent_from, gathered = traced()
    check(int(sent_from) == root and gathered.numpy().tolist() == [10 * r for r in range(size)],
          "object collectives inside tf.function: %s %s" % (sent_from, gathered))
    got = hvd.broadcast_object(obj, root_rank=root)
    check(got["from"] == root and got["scale"](2) == 2 * size, "broadcast_object of a lambda")
    eager_fn = hvd.broadcast_object_fn(root_rank=0)
    check(eager_fn([rank]) == [0], "broadcast_object_fn eagerly")
    graph = tf.Graph()
    with graph.as_default(), tf.compat.v1.Session(graph=graph) as session:
        got = hvd.broadcast_object({"rank": rank}, root_rank=0, session=session)
        gathered = hvd.allgather_object(rank, session=session)
        bcast = hvd.broadcast_object_fn(root_rank=root, session=session)
        first, second = bcast(("a", rank)), bcast(("b", rank))
    check(got == {"rank": 0} and gathered == list(range(size)), "objects in a session")
    check(first == ("a", root) and second == ("b", root), "broadcast_object_fn in a session")


def check_in_place_broadcasts():
    size, rank = hvd.size(), hvd.rank()
    variables = [tf.Variable([float(rank)] * 3), tf.Variable(rank, dtype=tf.int64)]
    values = hvd.broadcast_(variables, root_rank=size - 1)
    check(isinstance(values, list) and len(values) == 2 and
          np.all(values[0].numpy() == size - 1) and int(variables[1].numpy()) == size - 1,
          "broadcast_: %s" % values)
    variables[0].assign([float(rank) + 7] * 3)
    hvd.broadcast_variables(variables, root_rank=0, inplace=True)
    check(np.all(variables[0].numpy() == 7), "broadcast_variables(inplace=True)")


# ---- process sets and errors -----------------------------------------------------------

def check_process_set_ops():
    size, rank = hvd.size(), hvd.rank()
    check(int(hvd.size_op()) == size and int(hvd.process_set_included_op()) == 1,
          "size_op / process_set_included_op of the global set")
    if size < 2:
        return
    first = hvd.add_process_set([0])
    included = int(hvd.process_set_included_op(first.process_set_id))
    check(included == (1 if rank == 0 else 0), "process_set_included_op: %d" % included)
    check(int(hvd.size_op(process_set_id=first.process_set_id)) == 1, "size_op of a set")
    traced = tf.function(lambda: hvd.process_set_included_op(first.process_set_id))
    check(int(traced()) == included, "process_set_included_op in tf.function")
    if rank != 0:
        # Horovod: a set this rank is not in is an InvalidArgumentError of TensorFlow.
        expect_error(tf.errors.InvalidArgumentError,
                     lambda: hvd.allreduce(tf.ones([1]), process_set=first))
    hvd.remove_process_set(first)
    # A set that was never registered: ValueError.
    expect_error(ValueError, lambda: hvd.allreduce(tf.ones([1]),
                                                   process_set=hvd.ProcessSet([0])))


def check_errors():
    size, rank = hvd.size(), hvd.rank()
    # Horovod refuses a scalar reducescatter (InvalidArgumentError eagerly, ValueError while
    # tracing, from the op's shape check).
    expect_error(tf.errors.InvalidArgumentError, lambda: hvd.reducescatter(tf.constant(1.0)),
                 "scalar")
    expect_error(ValueError, tf.function(lambda: hvd.reducescatter(tf.constant(1.0))),
                 "scalar")
    expect_error(tf.errors.InvalidArgumentError,
                 lambda: hvd.grouped_reducescatter([tf.ones([size]), tf.constant(2.0)]),
                 "scalar")
    if size > 1:
        expect_error(tf.errors.FailedPreconditionError,
                     lambda: hvd.allreduce(tf.ones([rank + 1]), name="compat.mismatch"),
                     "compat.mismatch")
    after = hvd.allreduce(tf.constant(1.0), op=hvd.Sum)
    check(float(after) == size, "allreduce after the errors")


def main():
    check_names()
    check_alltoall()
    check_broadcast_gradient()
    check_reducescatter_gradient()
    check_grouped_allgather_gradient()
    check_indexed_slices()
    check_objects()
    check_in_place_broadcasts()
    check_process_set_ops()
    check_errors()
