"""Negotiation scenarios on several ranks: `negotiation.py <scenario>`.

  order     ranks submit the same named requests in different orders; all complete
  shape     rank r offers shape (r + 2,) for one name; every rank gets PreconditionError
  dtype     rank 0 offers float32, the others float64
  op        rank 0 asks for Sum, the others for Max
  duplicate rank 0 submits a name twice while the first is still in flight

A rank prints "rank R: <Class>: <message>" for each error it sees, then proves the job
still works with one more allreduce, and prints "rank R: recovered".
"""

import sys
import time

import numpy as np

import tutti.numpy as hvd


def say(line):
    """Prints one line with a single write, so lines of different ranks never interleave."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def order(rank, size):
    names = ["tensor.%d" % i for i in range(12)]
    # Rank 0 forward, rank 1 backward, others a rank-seeded shuffle.
    submitted = list(names)
    if rank == 1:
        submitted.reverse()
    elif rank > 1:
        np.random.default_rng(rank).shuffle(submitted)
    handles = {}
    for name in submitted:
        index = names.index(name)
        handles[name] = hvd.allreduce_async(
            np.full((index + 1, 3), float(rank + index), np.float32), op=hvd.Sum, name=name)
    for index, name in enumerate(names):
        got = hvd.synchronize(handles[name], timeout=60)
        expected = sum(float(r + index) for r in range(size))
        assert np.array_equal(got, np.full((index + 1, 3), expected, np.float32)), (name, got)
    say("rank %d: order %s ok" % (rank, ",".join(n.split(".")[1] for n in submitted)))


def report(rank, function):
    try:
        function()
    except hvd.TuttiError as exc:
        say("rank %d: %s: %s" % (rank, type(exc).__name__, exc))
        return
    say("rank %d: no error" % rank)


def shape(rank, size):
    report(rank, lambda: hvd.allreduce(np.ones(rank + 2, np.float32), name="mismatch"))


def dtype(rank, size):
    kind = np.float32 if rank == 0 else np.float64
    report(rank, lambda: hvd.allreduce(np.ones(4, kind), name="mismatch"))


def op(rank, size):
    reduction = hvd.Sum if rank == 0 else hvd.Max
    report(rank, lambda: hvd.allreduce(np.ones(4, np.float32), op=reduction, name="mismatch"))


def duplicate(rank, size):
    if rank == 0:
        first = hvd.allreduce_async(np.ones(3), op=hvd.Sum, name="twice")
        report(rank, lambda: hvd.synchronize(
            hvd.allreduce_async(np.ones(3), op=hvd.Sum, name="twice"), timeout=60))
        got = hvd.synchronize(first, timeout=60)
    else:
        time.sleep(0.5)  # keep rank 0's first request in flight while it submits the second
        got = hvd.allreduce(np.ones(3), op=hvd.Sum, name="twice")
    assert np.array_equal(got, np.full(3, float(size))), got


def main(scenario):
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    {"order": order, "shape": shape, "dtype": dtype, "op": op, "duplicate": duplicate}[
        scenario](rank, size)
    got = hvd.allreduce(np.full(2, rank, np.int32), op=hvd.Sum, name="after")
    assert np.array_equal(got, np.full(2, sum(range(size)), np.int32)), got
    say("rank %d: recovered" % rank)
    hvd.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
