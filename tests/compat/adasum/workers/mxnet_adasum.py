"""tutti.mxnet with op=hvd.Adasum against the float64 numpy reference (allreduce,
allreduce_, grouped_allreduce), and Horovod's refusal on a number of ranks that is not a
power of two."""

import sys

import tutti.mxnet as hvd

import mxnet as mx
import numpy as np

from adasum_reference import check, tensor


def say(text):
    print(text, flush=True)


def collectives(rank, size):
    for dtype in (np.float16, np.float32, np.float64):
        per_rank = [tensor(r, (3, 7), dtype, 60) for r in range(size)]
        got = hvd.allreduce(mx.nd.array(per_rank[rank], dtype=dtype), op=hvd.Adasum,
                            name="ar.%s" % np.dtype(dtype).name)
        check(got.asnumpy(), per_rank, "allreduce %s" % np.dtype(dtype).name)
        in_place = mx.nd.array(per_rank[rank], dtype=dtype)
        hvd.allreduce_(in_place, op=hvd.Adasum, name="ar_.%s" % np.dtype(dtype).name)
        check(in_place.asnumpy(), per_rank, "allreduce_ %s" % np.dtype(dtype).name)
    groups = [[tensor(r, (n,), np.float32, 70 + n) * np.float32(10.0 ** n) for r in range(size)]
              for n in (2, 6)]
    got = hvd.grouped_allreduce([mx.nd.array(g[rank]) for g in groups], op=hvd.Adasum,
                                name="grouped")
    for g, result in zip(groups, got):
        check(result.asnumpy(), g, "grouped_allreduce")


def refused_on_odd_counts(rank, size):
    try:
        hvd.allreduce(mx.nd.ones(3), op=hvd.Adasum)
        raise AssertionError("Adasum on %d ranks was accepted" % size)
    except NotImplementedError as e:
        assert str(e) == "Running Adasum with non-power of 2 ranks is not supported yet.", e


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    run = refused_on_odd_counts if size & (size - 1) else collectives
    try:
        run(rank, size)
    except Exception as e:
        say("rank %d/%d: FAIL %s: %s: %s" % (rank, size, run.__name__, type(e).__name__, e))
        sys.exit(1)
    say("rank %d/%d: ok %s" % (rank, size, run.__name__))
    say("rank %d/%d: ALL OK" % (rank, size))


if __name__ == "__main__":
    main()
