"""Checks of the collectives besides allreduce (run by tensorflow_checks.py): allgather,
broadcast, alltoall, reducescatter and their grouped forms on every dtype and several
shapes, eagerly and in tf.function; grouped allreduce; their gradients; process sets,
join, barrier, the object helpers; and the errors of bad requests."""

import numpy as np
import tensorflow as tf

import tutti.tensorflow as hvd
from allreduce_checks import DTYPES, as_float64
from checking import check, expect_error

TRAILING = [(), (3,), (2, 2)]  # trailing dimensions of the tensors


def values(rank, rows, trailing, dtype, salt=0):
    """Rank `rank`'s tensor as float64: distinct small integers (0/1 for bool)."""
    shape = (rows,) + trailing
    count = int(np.prod(shape))
    base = (np.arange(count) + 7 * rank + 3 * salt) % 23
    if dtype == tf.bool:
        base = base % 2
    return base.astype(np.float64).reshape(shape)


def as_tensor(array, dtype):
    return tf.cast(tf.constant(array), dtype)


def same(result, want, dtype, where):
    check(result.dtype == dtype, "%s: dtype %s, expected %s" % (where, result.dtype, dtype))
    got = as_float64(result)
    check(got.shape == want.shape and np.array_equal(got, want),
          "%s %s: got %s, expected %s" % (where, dtype.name, got, want))


# ---- expected results ----------------------------------------------------------------

def gather_case(dtype, trailing, salt=0):
    size, rank = hvd.size(), hvd.rank()
    mine = values(rank, rank + 1, trailing, dtype, salt)
    want = np.concatenate([values(r, r + 1, trailing, dtype, salt) for r in range(size)])
    return as_tensor(mine, dtype), want


def broadcast_case(dtype, trailing, root):
    mine = values(hvd.rank(), 2, trailing, dtype)
    return as_tensor(mine, dtype), values(root, 2, trailing, dtype)


def alltoall_splits(rank, size):
    return [(rank + j) % 3 for j in range(size)]  # some parts are empty


def alltoall_case(dtype, trailing, uneven):
    size, rank = hvd.size(), hvd.rank()

    def splits_of(r):
        return alltoall_splits(r, size) if uneven else [2] * size

    def tensor_of(r):
        return values(r, sum(splits_of(r)), trailing, dtype)

    parts = []
    for r in range(size):
        offsets = np.cumsum([0] + splits_of(r))
        parts.append(tensor_of(r)[offsets[rank]:offsets[rank + 1]])
    received = [splits_of(r)[rank] for r in range(size)]
    splits = splits_of(rank) if uneven else None
    return as_tensor(tensor_of(rank), dtype), splits, np.concatenate(parts), received


def scatter_rows(rows, size, rank):
    counts = [rows // size + (1 if r < rows % size else 0) for r in range(size)]
    start = sum(counts[:rank])
    return start, start + counts[rank]


def reduce_np(stack, op, dtype):
    if dtype == tf.bool:
        return stack.max(0) if op in (hvd.Sum, hvd.Max) else stack.min(0)
    return {hvd.Sum: stack.sum(0), hvd.Max: stack.max(0), hvd.Min: stack.min(0),
            hvd.Average: stack.sum(0) / stack.shape[0]}[op]


def scatter_op(dtype):
    # Average of integers is exact only when the sum divides; Sum/Max cover bool.
    return hvd.Max if dtype == tf.bool else hvd.Sum


def reducescatter_case(dtype, trailing, op, salt=0):
    size, rank = hvd.size(), hvd.rank()
    rows = 2 * size + 1  # uneven: the first rank gets one more row
    mine = values(rank, rows, trailing, dtype, salt)
    full = reduce_np(np.stack([values(r, rows, trailing, dtype, salt) for r in range(size)]),
                     op, dtype)
    start, end = scatter_rows(rows, size, rank)
    return as_tensor(mine, dtype), full[start:end]


# ---- values, eagerly and in tf.function ------------------------------------------------

def run_cases(dtype, collective):
    """Runs every case of one dtype through `collective` (eager or traced) and checks."""
    root = hvd.size() - 1
    inputs = []
    for trailing in TRAILING:
        inputs.append(("allgather", gather_case(dtype, trailing)))
        inputs.append(("broadcast", broadcast_case(dtype, trailing, root)))
        inputs.append(("broadcast0", broadcast_case(dtype, trailing, 0)))
        inputs.append(("reducescatter", reducescatter_case(dtype, trailing, scatter_op(dtype))))
        for uneven in (False, True):
            tensor, splits, want, received = alltoall_case(dtype, trailing, uneven)
            inputs.append(("alltoall", ((tensor, splits), (want, received))))
    a, want_a = gather_case(dtype, (3,), salt=1)
    b, want_b = gather_case(dtype, (), salt=2)
    inputs.append(("grouped_allgather", ((a, b), (want_a, want_b))))
    a, want_a = reducescatter_case(dtype, (2,), scatter_op(dtype), salt=1)
    b, want_b = reducescatter_case(dtype, (), scatter_op(dtype), salt=2)
    inputs.append(("grouped_reducescatter", ((a, b), (want_a, want_b))))
    results = collective([(kind, given) for kind, (given, _) in inputs])
    for (kind, (_, want)), result in zip(inputs, results):
        where = "%s (%s)" % (kind, collective.__name__)
        if kind == "alltoall" and not isinstance(result, (tuple, list)):
            same(result, want[0], dtype, where + " without splits (the tensor alone)")
        elif kind == "alltoall":
            same(result[0], want[0], dtype, where)
            check(result[1].dtype == tf.int32 and list(result[1].numpy()) == want[1],
                  "%s received splits %s, expected %s" % (where, result[1], want[1]))
        elif kind.startswith("grouped"):
            for part, wanted in zip(result, want):
                same(part, wanted, dtype, where)
        else:
            same(result, want, dtype, where)


def submit(cases):
    root = hvd.size() - 1
    results = []
    for kind, given in cases:
        if kind == "allgather":
            results.append(hvd.allgather(given))
        elif kind == "broadcast":
            results.append(hvd.broadcast(given, root))
        elif kind == "broadcast0":
            results.append(hvd.broadcast(given, 0))
        elif kind == "reducescatter":
            results.append(hvd.reducescatter(given, op=scatter_op(given.dtype)))
        elif kind == "alltoall":
            results.append(hvd.alltoall(given[0], splits=given[1]))
        elif kind == "grouped_allgather":
            results.append(hvd.grouped_allgather(list(given)))
        elif kind == "grouped_reducescatter":
            results.append(hvd.grouped_reducescatter(list(given), op=scatter_op(given[0].dtype)))
    return results


def eager(cases):
    return submit(cases)


def in_function(cases):
    # The inputs are captured by the trace as constants.
    return tf.function(lambda: submit(cases))()


def check_values():
    for dtype in DTYPES:
        run_cases(dtype, eager)
        run_cases(dtype, in_function)


def check_grouped_allreduce_and_mixed_dtypes():
    size, rank = hvd.size(), hvd.rank()
    tensors = [tf.fill([2, 3], float(rank + 1)), tf.constant([rank + 1], tf.int64),
               tf.fill([4], float(rank)), tf.constant(2.0 * rank, tf.float64)]
    total = sum(r + 1 for r in range(size))
    wants = [np.full((2, 3), total), [total], np.full(4, sum(range(size))),
             2.0 * sum(range(size))]

    def run():
        return hvd.grouped_allreduce(tensors, op=hvd.Sum)

    for where, results in [("eager", run()), ("tf.function", tf.function(run)())]:
        for tensor, result, want in zip(tensors, results, wants):
            check(result.dtype == tensor.dtype and np.array_equal(result.numpy(), want),
                  "grouped_allreduce %s: %s vs %s" % (where, result, want))
    averaged = hvd.grouped_allreduce([tf.fill([3], float(rank))], op=hvd.Average,
                                     prescale_factor=2.0, postscale_factor=0.5)[0]
    check(np.allclose(averaged.numpy(), sum(range(size)) / size), "scaled grouped average")
    fp16 = hvd.grouped_allreduce([tf.fill([3], 1.5)], op=hvd.Sum,
                                 compression=hvd.Compression.fp16)[0]
    check(fp16.dtype == tf.float32 and np.allclose(fp16.numpy(), 1.5 * size), "fp16 grouped")
    mixed = hvd.grouped_allgather([tf.fill([rank + 1], rank), tf.fill([1, 2], 0.5)])
    check(mixed[0].numpy().tolist() == [r for r in range(size) for _ in range(r + 1)] and
          mixed[1].shape == (size, 2), "grouped_allgather of mixed dtypes: %s" % mixed)


# ---- gradients ---------------------------------------------------------------------------

def check_gradients():
    size, rank = hvd.size(), hvd.rank()
    weight = float(rank + 1)  # each rank's loss weighs the outputs differently
    weight_mean = sum(r + 1.0 for r in range(size)) / size

    def gradient(function, start, *, graph):
        variable = tf.Variable(start)

        def run():
            with tf.GradientTape() as tape:
                loss = function(variable)
            return tape.gradient(loss, variable)

        return (tf.function(run)() if graph else run()).numpy()

    x = np.full((rank + 1, 2), 1.0 + rank, np.float32)
    for graph in (False, True):
        tag = "tf.function" if graph else "eager"
        # allgather: averaged output gradient, this rank's rows.
        got = gradient(lambda v: tf.reduce_sum(weight * hvd.allgather(v * v)), x, graph=graph)
        check(np.allclose(got, weight_mean * 2 * x), "%s allgather gradient %s" % (tag, got))
        got = gradient(lambda v: tf.reduce_sum(weight * hvd.grouped_allgather([v, 3 * v])[1]),
                       x, graph=graph)
        check(np.allclose(got, weight_mean * 3), "%s grouped_allgather gradient %s" % (tag, got))
        # broadcast: the root gets the averaged gradient, the others zeros.
        root = size - 1
        got = gradient(lambda v: tf.reduce_sum(weight * hvd.broadcast(v * 2.0, root)),
                       np.ones(3, np.float32), graph=graph)
        want = 2.0 * weight_mean * (rank == root)
        check(np.allclose(got, want), "%s broadcast gradient %s vs %s" % (tag, got, want))
        # alltoall: each row's gradient comes back from where the row went.
        splits = alltoall_splits(rank, size)
        start = np.arange(sum(splits), dtype=np.float32) + 10 * rank
        got = gradient(lambda v: tf.reduce_sum(weight * hvd.alltoall(v * v, splits=splits)[0]),
                       start, graph=graph)
        owners = np.repeat(np.arange(size), splits)  # rank that received each row
        check(np.allclose(got, 2 * start * (owners + 1.0)), "%s alltoall gradient %s"
              % (tag, got))
        # reducescatter: every rank's part gradient, gathered, times the set size for Sum
        # (Horovod's gradient).
        rows = 2 * size + 1
        for op, factor in ((hvd.Sum, float(size)), (hvd.Average, 1.0)):
            got = gradient(lambda v: tf.reduce_sum(weight * hvd.reducescatter(v, op=op)),
                           np.ones((rows, 2), np.float32), graph=graph)
            part_weight = np.concatenate([np.full(scatter_rows(rows, size, r)[1] -
                                                  scatter_rows(rows, size, r)[0], r + 1.0)
                                          for r in range(size)])
            check(np.allclose(got, factor * part_weight[:, None]),
                  "%s reducescatter %s gradient %s" % (tag, op.name, got))
        # grouped allreduce: the same reduction of the output gradients.
        got = gradient(lambda v: tf.reduce_sum(weight * hvd.grouped_allreduce(
            [v, 2 * v], op=hvd.Sum)[1]), np.ones(2, np.float32), graph=graph)
        check(np.allclose(got, 2 * weight_mean * size), "%s grouped_allreduce gradient %s"
              % (tag, got))
    expect_error(NotImplementedError, lambda: gradient(
        lambda v: tf.reduce_sum(hvd.reducescatter(v, op=hvd.Max)),
        np.ones((size, 1), np.float32), graph=False), "reducescatter")


# ---- process sets, join, barrier, objects ---------------------------------------------

def check_process_sets():
    size, rank = hvd.size(), hvd.rank()
    if size < 2:
        return
    pair = hvd.add_process_set([0, size - 1])
    if pair.included():
        me = pair.rank()
        total = hvd.allreduce(tf.constant([rank + 1.0]), op=hvd.Sum, process_set=pair)
        check(float(total[0]) == 1.0 + size, "allreduce on a process set: %s" % total)
        gathered = hvd.allgather(tf.fill([me + 1], me), process_set=pair)
        check(gathered.numpy().tolist() == [0, 1, 1], "allgather on a set: %s" % gathered)
        got = hvd.broadcast(tf.constant([rank]), size - 1, process_set=pair)
        check(int(got[0]) == size - 1, "broadcast root is a global rank: %s" % got)
        received = hvd.alltoall(tf.constant([10 * me, 10 * me + 1]), process_set=pair)
        check(received.numpy().tolist() == [me, 10 + me], "alltoall on a set: %s" % received)
        part = hvd.reducescatter(tf.ones([3, 1]), op=hvd.Sum, process_set=pair)
        check(part.shape == (2 - me, 1) and np.all(part.numpy() == 2), "reducescatter on a set")

        @tf.function
        def on_set(x):
            return (hvd.allreduce(x, op=hvd.Sum, process_set=pair),
                    hvd.allgather(x, process_set=pair))

        reduced, gathered = on_set(tf.constant([float(me)]))
        check(float(reduced[0]) == 1.0 and gathered.numpy().tolist() == [0.0, 1.0],
              "tf.function on a set: %s %s" % (reduced, gathered))
        hvd.barrier(process_set=pair)
        obj = hvd.broadcast_object({"from": rank}, root_rank=size - 1, process_set=pair)
        check(obj == {"from": size - 1}, "broadcast_object on a set: %s" % obj)
    else:
        expect_error(tf.errors.InvalidArgumentError,
                     lambda: hvd.allreduce(tf.ones([1]), process_set=pair), "not in")
    # Collectives on the whole job still agree on their names after set-only requests.
    everyone = hvd.allreduce(tf.constant([1.0]), op=hvd.Sum)
    check(float(everyone[0]) == size, "global allreduce after set requests")
    hvd.remove_process_set(pair)


def check_global_roots():
    """root_rank on a set is a global rank (Horovod 0.28.1): on [1, 2] rank 2 is the root,
    eagerly, in tf.function, for the gradient, broadcast_variables and broadcast_object;
    rank 0 is no root there (tf.errors.InvalidArgumentError, as in Horovod)."""
    size, rank = hvd.size(), hvd.rank()
    if size < 3:
        return
    pair = hvd.add_process_set([1, 2])
    if pair.included():
        got = hvd.broadcast(tf.constant([10 * rank]), 2, process_set=pair)
        check(got.numpy().tolist() == [20], "broadcast from global rank 2: %s" % got)
        in_function = tf.function(lambda x: hvd.broadcast(x, 1, process_set=pair))
        got = in_function(tf.constant([10 * rank]))
        check(got.numpy().tolist() == [10], "broadcast from rank 1 in tf.function: %s" % got)
        x = tf.constant([1.0, 1.0])
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = hvd.broadcast(x, 2, process_set=pair) * float(rank)
        grad = tape.gradient(y, x)
        want = 1.5 if rank == 2 else 0.0  # the members' average output gradient, on the root
        check(grad.numpy().tolist() == [want, want], "broadcast gradient, root 2: %s" % grad)
        variable = tf.Variable([float(rank)])
        hvd.broadcast_variables([variable], root_rank=2, process_set=pair)
        check(variable.numpy().tolist() == [2.0], "broadcast_variables from rank 2")
        obj = hvd.broadcast_object({"from": rank}, root_rank=2, process_set=pair)
        check(obj == {"from": 2}, "broadcast_object from rank 2 on a set: %s" % obj)
        expected = "root_rank 0 is not a member of process set %d (ranks 1, 2)" % (
            pair.process_set_id)
        expect_error(tf.errors.InvalidArgumentError,
                     lambda: hvd.broadcast(tf.ones([1]), 0, name="root0", process_set=pair),
                     "broadcast of 'root0': " + expected)
        expect_error(tf.errors.InvalidArgumentError,
                     lambda: hvd.broadcast_object("x", 0, process_set=pair), expected)
    hvd.barrier()
    hvd.remove_process_set(pair)


def check_join():
    size, rank = hvd.size(), hvd.rank()
    # Rank 0 has run out of data: it joins while the others make one more allreduce, to
    # which it contributes zeros.
    if rank != 0:
        extra = hvd.allreduce(tf.constant([float(rank)]), op=hvd.Sum, name="after.join")
        check(float(extra[0]) == sum(range(size)), "allreduce with a joined rank: %s" % extra)
    last = int(hvd.join())
    check(0 <= last < size and (size == 1 or last != 0), "join returned %d" % last)
    # Afterwards every rank numbers unnamed requests alike again.
    gathered = hvd.allgather(tf.constant([rank]))
    check(gathered.numpy().tolist() == list(range(size)), "allgather after join: %s" % gathered)
    hvd.barrier()


def check_objects_and_variables():
    size, rank = hvd.size(), hvd.rank()
    obj = hvd.broadcast_object({"rank": rank, "list": list(range(rank + 3))}, root_rank=size - 1)
    check(obj == {"rank": size - 1, "list": list(range(size + 2))}, "broadcast_object: %s" % obj)
    gathered = hvd.allgather_object(("rank", rank, "x" * rank))
    check(gathered == [("rank", r, "x" * r) for r in range(size)], "allgather_object")
    variables = [tf.Variable(tf.fill([2, 2], float(rank))), tf.Variable(rank, dtype=tf.int64),
                 tf.Variable(tf.constant([rank, 7], tf.uint32))]
    hvd.broadcast_variables(variables, root_rank=size - 1)
    check(np.all(variables[0].numpy() == size - 1) and int(variables[1].numpy()) == size - 1
          and variables[2].numpy().tolist() == [size - 1, 7], "broadcast_variables")

    @tf.function
    def broadcast_in_function():
        hvd.broadcast_variables(variables[:1], root_rank=0)

    variables[0].assign(tf.fill([2, 2], float(rank + 5)))
    broadcast_in_function()
    check(np.all(variables[0].numpy() == 5), "broadcast_variables in tf.function: %s"
          % variables[0].numpy())


# ---- errors ------------------------------------------------------------------------------

def check_errors():
    size, rank = hvd.size(), hvd.rank()
    failed = tf.errors.FailedPreconditionError
    expect_error(TypeError, lambda: hvd.allgather(tf.constant([1 + 2j])), "complex128")
    expect_error(TypeError, lambda: hvd.allreduce(tf.constant(["text"])), "string")
    expect_error(TypeError, lambda: hvd.broadcast(tf.ones([1]), root_rank=0.5), "root_rank")
    expect_error(tf.errors.InvalidArgumentError, lambda: hvd.allgather(tf.constant(1.0)),
                 "scalar")  # the core refuses it eagerly; shape inference in a graph
    expect_error(ValueError, tf.function(lambda: hvd.allgather(tf.constant(1.0))), "rank")
    expect_error(ValueError, lambda: hvd.alltoall(tf.ones([2]), splits=[[1]]), "vector")
    expect_error(tf.errors.InvalidArgumentError,
                 lambda: hvd.alltoall(tf.ones([size + 1]), splits=[1] * (size + 1)), "split")
    if size < 2:
        return
    message = expect_error(failed, lambda: hvd.allgather(tf.ones([1, rank + 1]), name="ag.bad"),
                           "ag.bad", "ranks disagree", "shape")
    expect_error(failed, lambda: hvd.broadcast(tf.ones([rank + 1]), 0, name="bc.bad"),
                 "bc.bad", "ranks disagree")
    expect_error(failed, lambda: hvd.broadcast(tf.ones([1]), rank, name="bc.root"),
                 "bc.root", "root")
    expect_error(failed, lambda: hvd.reducescatter(
        tf.ones([size]), op=hvd.Sum if rank else hvd.Max, name="rs.op"), "rs.op", "op")

    @tf.function
    def mismatched_alltoall():
        return hvd.alltoall(tf.ones([size, rank + 1]), name="a2a.bad")

    expect_error(failed, mismatched_alltoall, "a2a.bad", "ranks disagree")
    expect_error(failed, lambda: hvd.grouped_allreduce(
        [tf.ones([2])] * (rank + 1), name="group.bad"), "group.bad")
    after = hvd.allgather(tf.constant([rank]))
    check(after.numpy().tolist() == list(range(size)), "allgather after errors")
    return message
