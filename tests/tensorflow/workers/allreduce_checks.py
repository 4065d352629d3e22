"""Checks of tutti.tensorflow's allreduce, topology and lifecycle (run by
tensorflow_checks.py): every dtype, op and shape, eagerly and in tf.function, scaling,
gradients and the errors the core reports."""

import warnings

import numpy as np
import tensorflow as tf

import tutti.tensorflow as hvd

# Each dtype gets its own traced function on purpose; the retracing warning is noise here.
tf.get_logger().setLevel("ERROR")

DTYPES = [
    tf.uint8, tf.int8, tf.uint16, tf.int16, tf.int32, tf.int64,
    tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.bool,
]
OPS = [hvd.Average, hvd.Sum, hvd.Min, hvd.Max, hvd.Product]
SHAPES = [(5,), (3, 4), (2, 3, 2)]

from checking import check, expect_error


# ---- inputs and expected results -------------------------------------------------------

def contribution(rank, shape, dtype):
    """Rank `rank`'s input as float64: small values whose reductions are exact in every
    dtype, and whose sum over ranks is even (so integer averages are exact)."""
    count = int(np.prod(shape))
    if dtype == tf.bool:
        return ((np.arange(count) // (rank + 1)) % 2 == 0).astype(np.float64).reshape(shape)
    return ((np.arange(count) % 3) + 1 + 2 * rank).astype(np.float64).reshape(shape)


def expected(op, shape, dtype, size, prescale=1.0, postscale=1.0):
    inputs = np.stack([prescale * contribution(r, shape, dtype) for r in range(size)])
    if dtype == tf.bool:
        any_, all_ = inputs.max(axis=0), inputs.min(axis=0)
        return {hvd.Sum: any_, hvd.Max: any_, hvd.Min: all_, hvd.Product: all_}[op]
    reduced = {
        hvd.Average: inputs.sum(axis=0) / size,
        hvd.Sum: inputs.sum(axis=0),
        hvd.Min: inputs.min(axis=0),
        hvd.Max: inputs.max(axis=0),
        hvd.Product: inputs.prod(axis=0),
    }[op]
    return postscale * reduced


def local_input(shape, dtype):
    return tf.cast(tf.constant(contribution(hvd.rank(), shape, dtype)), dtype)


def as_float64(tensor):
    return tf.cast(tensor, tf.float64).numpy()


def cases():
    for dtype in DTYPES:
        for op in OPS:
            if dtype == tf.bool and op == hvd.Average:
                continue  # not defined for bool; checked as an error below
            for shape in SHAPES:
                yield dtype, op, shape


def check_result(result, dtype, op, shape, where, prescale=1.0, postscale=1.0):
    want = expected(op, shape, dtype, hvd.size(), prescale, postscale)
    check(result.dtype == dtype, "%s: dtype %s, expected %s" % (where, result.dtype, dtype))
    check(tuple(result.shape) == shape, "%s: shape %s, expected %s" % (where, result.shape, shape))
    got = as_float64(result)
    check(np.array_equal(got, want),
          "%s %s %s %s: got %s, expected %s" % (where, dtype.name, op.name, shape, got, want))


# ---- checks ------------------------------------------------------------------------------

def check_before_init():
    check(not hvd.is_initialized(), "initialized before init()")
    expect_error(tf.errors.FailedPreconditionError,
                 lambda: hvd.allreduce(tf.ones([2])), "init")
    expect_error(tf.errors.FailedPreconditionError, lambda: hvd.size_op(), "init")
    expect_error(RuntimeError, hvd.rank, "init")


def check_topology(expected_size, expected_controller):
    check(hvd.is_initialized(), "not initialized after init()")
    check(hvd.size() == expected_size, "size %d, expected %d" % (hvd.size(), expected_size))
    check(0 <= hvd.rank() < hvd.size(), "rank %d out of range" % hvd.rank())
    check(0 <= hvd.local_rank() < hvd.local_size() <= hvd.size(), "local rank/size")
    check(0 <= hvd.cross_rank() < hvd.cross_size(), "cross rank/size")
    check(hvd.mpi_enabled() == (expected_controller == "mpi"), "mpi_enabled()")
    check(hvd.gloo_enabled() == (expected_controller == "gloo"), "gloo_enabled()")
    check(hvd.mpi_built() and hvd.gloo_built(), "MPI and Gloo are built into this core")
    check(isinstance(hvd.nccl_built(), bool) and isinstance(hvd.cuda_built(), bool), "*_built()")
    check(hvd.__version__ == "0.1.0", "version %s" % hvd.__version__)

    @tf.function
    def topology():
        return hvd.size_op(), hvd.rank_op(), hvd.local_size_op(), hvd.local_rank_op()

    got = [int(t) for t in topology()]
    want = [hvd.size(), hvd.rank(), hvd.local_size(), hvd.local_rank()]
    check(got == want, "topology ops %s, expected %s" % (got, want))


def check_values_eagerly():
    for dtype, op, shape in cases():
        result = hvd.allreduce(local_input(shape, dtype), op=op)
        check_result(result, dtype, op, shape, "eager")


def check_values_in_function():
    # One traced function per dtype; its 15 allreduces are pending at the same time.
    for dtype in DTYPES:
        ops = [op for op in OPS if not (dtype == tf.bool and op == hvd.Average)]

        @tf.function
        def reduce_all(inputs):
            return [[hvd.allreduce(x, op=op) for x in inputs] for op in ops]

        results = reduce_all([local_input(shape, dtype) for shape in SHAPES])
        for op, per_shape in zip(ops, results):
            for shape, result in zip(SHAPES, per_shape):
                check_result(result, dtype, op, shape, "tf.function")


def check_scaling():
    shape = (3, 4)
    for dtype, prescale, postscale in [
        (tf.float32, 0.5, 3.0), (tf.float64, 0.5, 3.0), (tf.float16, 0.5, 3.0),
        (tf.bfloat16, 0.5, 3.0), (tf.int32, 2.0, 0.5), (tf.int64, 2.0, 0.5),
        (tf.uint8, 2.0, 0.5),
    ]:
        for op in (hvd.Sum, hvd.Average, hvd.Max):
            result = hvd.allreduce(local_input(shape, dtype), op=op,
                                   prescale_factor=prescale, postscale_factor=postscale)
            check_result(result, dtype, op, shape, "eager scaled", prescale, postscale)

    @tf.function
    def scaled(x):
        return hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)

    check_result(scaled(local_input(shape, tf.float32)), tf.float32, hvd.Sum, shape,
                 "tf.function scaled", 0.5, 3.0)


def check_api_details():
    size, x = hvd.size(), local_input((4,), tf.float32)
    total = expected(hvd.Sum, (4,), tf.float32, size)
    # The default op is Average; average=True/False is the deprecated spelling.
    check(np.array_equal(hvd.allreduce(x).numpy(), total / size), "default op")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        check(np.array_equal(hvd.allreduce(x, average=False).numpy(), total), "average=False")
        check(np.array_equal(hvd.allreduce(x, average=True).numpy(), total / size), "average=True")
    expect_error(ValueError, lambda: hvd.allreduce(x, average=True, op=hvd.Sum), "average")
    expect_error(ValueError, lambda: hvd.allreduce(x, op=7), "op must be one of")
    # Explicit names, variables, IndexedSlices, fp16 compression.
    check(np.array_equal(hvd.allreduce(x, op=hvd.Sum, name="explicit name").numpy(), total),
          "named request")
    variable = tf.Variable(x)
    check(np.array_equal(hvd.allreduce(variable, op=hvd.Sum).numpy(), total), "tf.Variable")
    compressed = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    check(compressed.dtype == tf.float32 and np.array_equal(compressed.numpy(), total),
          "fp16 compression")
    slices = tf.IndexedSlices(tf.reshape(x, [2, 2]), tf.constant([0, 2]), tf.constant([3, 2]))
    reduced = hvd.allreduce(slices, op=hvd.Sum)
    check(isinstance(reduced, tf.IndexedSlices), "IndexedSlices in, IndexedSlices out")
    dense = tf.convert_to_tensor(reduced).numpy()
    want = np.zeros((3, 2))
    want[[0, 2]] = total.reshape(2, 2)  # the ranks' rows add up where they meet
    check(np.array_equal(dense, want), "IndexedSlices: %s vs %s" % (dense, want))
    # A scalar, empty tensors, a 16 MB tensor.
    check(float(hvd.allreduce(tf.constant(1.0), op=hvd.Sum)) == size, "scalar")
    empty = hvd.allreduce(tf.zeros([2, 0, 3], tf.int32), op=hvd.Sum)
    check(tuple(empty.shape) == (2, 0, 3), "empty tensor: shape %s" % empty.shape)
    large = hvd.allreduce(tf.fill([1 << 22], float(hvd.rank() + 1)), op=hvd.Sum).numpy()
    check(np.all(large == size * (size + 1) / 2), "16 MB tensor: %s" % large[:4])
    # A collective whose result is unused inside tf.function still runs.
    sink = tf.Variable(0.0)

    @tf.function
    def unused_result():
        hvd.allreduce(tf.constant([1.0]), op=hvd.Sum)
        sink.assign_add(1.0)
        return hvd.allreduce(tf.constant(2.0), op=hvd.Sum)

    check(float(unused_result()) == 2.0 * size, "tf.function with an unused allreduce")


def check_gradients():
    size, rank = hvd.size(), hvd.rank()
    weights = float(rank + 1)  # each rank's loss weighs the reduced tensor differently
    weight_sum = sum(r + 1.0 for r in range(size))
    start = contribution(rank, (2, 3), tf.float32)

    def loss_of(x, op, pre, post):
        return tf.reduce_sum(weights * hvd.allreduce(x * x, op=op, prescale_factor=pre,
                                                     postscale_factor=post))

    for op, pre, post in [(hvd.Sum, 1.0, 1.0), (hvd.Sum, 0.5, 3.0), (hvd.Average, 1.0, 1.0),
                          (hvd.Average, 2.0, 0.5)]:
        divisor = size if op == hvd.Average else 1
        want = weight_sum / divisor * pre * post * 2 * start
        variable = tf.Variable(start, dtype=tf.float32)
        with tf.GradientTape() as tape:
            loss = loss_of(variable, op, pre, post)
        got = tape.gradient(loss, variable).numpy()
        check(np.allclose(got, want), "eager gradient of %s: %s vs %s" % (op.name, got, want))

        @tf.function
        def gradient_in_function():
            with tf.GradientTape() as tape:
                loss = loss_of(variable, op, pre, post)
            return tape.gradient(loss, variable)

        got = gradient_in_function().numpy()
        check(np.allclose(got, want), "tf.function gradient of %s: %s" % (op.name, got))

        # The tape outside, the collective in a tf.function: TensorFlow builds a backward
        # function graph whose requests must also be named alike on every rank.
        with tf.GradientTape() as tape:
            loss = tf.function(loss_of)(variable, op, pre, post)
        got = tape.gradient(loss, variable).numpy()
        check(np.allclose(got, want), "gradient through tf.function of %s: %s" % (op.name, got))

    # Max: the summed output gradient reaches the rank(s) holding the maximum.
    x = tf.Variable([float(rank), float(size - 1 - rank), 5.0])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(weights * hvd.allreduce(x, op=hvd.Max))
    got = tape.gradient(loss, x).numpy()
    want = weight_sum * np.array([rank == size - 1, rank == 0, 1.0], dtype=np.float64)
    check(np.allclose(got, want), "gradient of Max: %s vs %s" % (got, want))


def check_core_errors():
    # Ranks that disagree give FailedPreconditionError with the core's message, and later
    # collectives still work.
    # A request the core refuses at once (invalid on its own) raises InvalidArgumentError.
    expect_error(tf.errors.InvalidArgumentError,
                 lambda: hvd.allreduce(tf.constant([True, False]), op=hvd.Average),
                 "AVERAGE is not defined for bool")
    if hvd.size() > 1:
        dtype = tf.float32 if hvd.rank() == 0 else tf.float64
        message = expect_error(
            tf.errors.FailedPreconditionError,
            lambda: hvd.allreduce(tf.ones([3], dtype), op=hvd.Sum, name="mismatched.dtype"),
            "mismatched.dtype", "ranks disagree", "dtype")
        check("float32" in message and "float64" in message, "dtypes named: " + message)
        shape = [3] if hvd.rank() == 0 else [4]

        @tf.function
        def mismatched_shape():
            return hvd.allreduce(tf.ones(shape), op=hvd.Sum)

        expect_error(tf.errors.FailedPreconditionError, mismatched_shape,
                     "ranks disagree", "shape")
    after = hvd.allreduce(tf.constant([1.0, 2.0]), op=hvd.Sum).numpy()
    check(np.array_equal(after, [hvd.size(), 2.0 * hvd.size()]), "allreduce after an error")


def check_after_shutdown():
    hvd.shutdown()
    check(not hvd.is_initialized(), "initialized after shutdown()")
    expect_error(tf.errors.FailedPreconditionError,
                 lambda: hvd.allreduce(tf.ones([2])), "init")
