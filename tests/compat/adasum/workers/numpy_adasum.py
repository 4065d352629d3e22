"""tutti.numpy allreduce(op=hvd.Adasum) on a power-of-two number of ranks, against the
float64 reference in adasum_reference.py; on other counts, Horovod's refusal.

Checks: float16/32/64 of several shapes; in place; grouped (one fused transport call that
must keep each tensor's own dot products); many requests in flight at once (fused by the
core); prescale/postscale; the same request repeated (response cache); a two-rank process
set; a joined rank (contributes zeros); the errors a user sees (dtype, reducescatter,
mismatched op). Prints "rank R/N: ok <check>" per check and "rank R/N: ALL OK" at the end;
exits 1 with the failing check otherwise.
"""

import sys

import numpy as np

import tutti.numpy as hvd
from adasum_reference import check, tensor


def say(text):
    print(text, flush=True)


def inputs(shape, dtype, seed):
    """Every rank's input for one request (so each rank can compute the reference)."""
    return [tensor(r, shape, dtype, seed) for r in range(hvd.size())]


def expect_error(kind, fragment, call):
    try:
        call()
    except kind as e:
        if fragment not in str(e):
            raise AssertionError("message %r lacks %r" % (str(e), fragment))
        return str(e)
    raise AssertionError("no %s raised" % kind.__name__)


def dtypes_and_shapes(rank):
    seed = 0
    for dtype in (np.float16, np.float32, np.float64):
        for shape in ((), (1,), (17,), (3, 5), (64, 33)):
            seed += 1
            per_rank = inputs(shape, dtype, seed)
            got = hvd.allreduce(per_rank[rank], op=hvd.Adasum, name="shapes.%d" % seed)
            assert got.dtype == dtype, got.dtype
            check(got, per_rank, "allreduce %s %s" % (np.dtype(dtype).name, shape))
            same_everywhere(got, "shapes.%d" % seed)
            in_place = per_rank[rank].copy()
            hvd.allreduce_(in_place, op=hvd.Adasum, name="in_place.%d" % seed)
            check(in_place, per_rank, "allreduce_ %s %s" % (np.dtype(dtype).name, shape))


def same_everywhere(result, what):
    """Every rank got the same bits."""
    gathered = hvd.allgather(result.reshape(1, -1), name="same." + what)
    if not all(np.array_equal(gathered[0], row) for row in gathered):
        raise AssertionError("%s: the ranks' results differ" % what)


def grouped_keeps_tensors_apart(rank):
    # Very different scales: an Adasum of the concatenation would differ from per-tensor.
    per_rank = [inputs((40,), np.float32, 100), inputs((7,), np.float32, 101),
                inputs((3, 3), np.float32, 102)]
    for i, scale in enumerate((1.0, 1000.0, 0.001)):
        per_rank[i] = [x * np.float32(scale) for x in per_rank[i]]
    got = hvd.grouped_allreduce([p[rank] for p in per_rank], op=hvd.Adasum, name="grouped")
    for i, result in enumerate(got):
        check(result, per_rank[i], "grouped tensor %d" % i)


def many_in_flight(rank):
    before = hvd.counters().get("fused_tensors", 0)
    requests = []
    for i in range(12):
        per_rank = inputs((5 + 13 * i,), np.float64, 200 + i)
        handle = hvd.allreduce_async(per_rank[rank], op=hvd.Adasum, name="flight.%d" % i)
        requests.append((handle, per_rank))
    for i, (handle, per_rank) in enumerate(requests):
        check(hvd.synchronize(handle), per_rank, "in flight %d" % i)
    say("rank %d/%d: fused tensors %d" % (rank, hvd.size(),
                                          hvd.counters().get("fused_tensors", 0) - before))


def scale_factors(rank):
    per_rank = inputs((31,), np.float64, 300)
    got = hvd.allreduce(per_rank[rank], op=hvd.Adasum, prescale_factor=0.5,
                        postscale_factor=3.0, name="scaled")
    check(got / 3.0, [x * 0.5 for x in per_rank], "prescale/postscale")


def repeated(rank):
    for step in range(4):  # the same request every step: served from the response cache
        per_rank = inputs((20,), np.float32, 400 + step)
        check(hvd.allreduce(per_rank[rank], op=hvd.Adasum, name="repeated"), per_rank,
              "repeated step %d" % step)


def process_set(rank):
    pair = hvd.add_process_set([0, 1])
    try:
        if rank in (0, 1):
            per_rank = inputs((9,), np.float32, 500)[:2]
            check(hvd.allreduce(per_rank[rank], op=hvd.Adasum, name="pair",
                                process_set=pair), per_rank, "process set [0, 1]")
        odd = hvd.add_process_set([1, 2, 3])
        if rank in (1, 2, 3):
            expect_error(NotImplementedError, "Running Adasum with non-power of 2 ranks",
                         lambda: hvd.allreduce(np.ones(3, np.float32), op=hvd.Adasum,
                                               process_set=odd))
        hvd.remove_process_set(odd)
    finally:
        hvd.remove_process_set(pair)


def joined_rank(rank):
    per_rank = inputs((11,), np.float32, 600)
    per_rank[0] = np.zeros_like(per_rank[0])  # rank 0 joins: it contributes zeros
    if rank == 0:
        hvd.join()
        return
    got = hvd.allreduce(per_rank[rank], op=hvd.Adasum, name="while.joined")
    hvd.join()
    check(got, per_rank, "with rank 0 joined")


def errors(rank):
    message = expect_error(hvd.InvalidArgumentError, "float16, float32 and float64",
                           lambda: hvd.allreduce(np.ones(4, np.int32), op=hvd.Adasum))
    assert "int32" in message, message
    say("rank %d/%d: int32: %s" % (rank, hvd.size(), message))
    message = expect_error(hvd.InvalidArgumentError, "reducescatter does not support it",
                           lambda: hvd.reducescatter(np.ones(4, np.float32), op=hvd.Adasum))
    say("rank %d/%d: reducescatter: %s" % (rank, hvd.size(), message))
    if hvd.size() == 1:
        return
    op = hvd.Adasum if rank == 0 else hvd.Sum
    message = expect_error(hvd.PreconditionError, "reduce op differs: adasum on rank 0",
                           lambda: hvd.allreduce(np.ones(4, np.float32), op=op, name="mixed"))
    say("rank %d/%d: mixed ops: %s" % (rank, hvd.size(), message))


def refused(rank):
    """Not a power of two: Horovod's NotImplementedError, before anything is submitted."""
    expect_error(NotImplementedError,
                 "Running Adasum with non-power of 2 ranks is not supported yet.",
                 lambda: hvd.allreduce(np.ones(4, np.float32), op=hvd.Adasum))
    # Nothing was submitted, so the ranks are still in step.
    got = hvd.allreduce(np.ones(4, np.float32), op=hvd.Sum, name="after.refusal")
    assert np.array_equal(got, np.full(4, hvd.size(), np.float32)), got


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    assert hvd.Adasum == 2 and hvd.ReduceOp.Adasum.name == "Adasum", hvd.Adasum
    if size & (size - 1):
        checks = [refused]
    else:
        checks = [dtypes_and_shapes, grouped_keeps_tensors_apart, many_in_flight,
                  scale_factors, repeated, errors]
        if size >= 4:
            checks.append(process_set)
        if size >= 2:
            checks.append(joined_rank)
    for run in checks:
        try:
            run(rank)
        except Exception as e:  # report which check failed, then stop this rank
            say("rank %d/%d: FAIL %s: %s: %s" % (rank, size, run.__name__,
                                                 type(e).__name__, e))
            sys.exit(1)
        say("rank %d/%d: ok %s" % (rank, size, run.__name__))
    hvd.shutdown()
    say("rank %d/%d: ALL OK" % (rank, size))


if __name__ == "__main__":
    main()
