"""100 x 40 KiB in one grouped call against one 4 MB mpi4py allreduce, taking turns call by
call (or in blocks) within one launch, so that both see the same spells of the machine.

    mpirun -np 2 python tools/bench/fused_interleaved.py [--calls 200] [--block 1]

tools/bench/run measures each contender in blocks of ten calls, one after the other; there a
contender's first calls pay for the caches the one before it left, and a spell of the VM
(tenths of a second to seconds) can fall on one block and not the next. Here the three
contenders (mpi4py's Allreduce of one 4000 KiB buffer, tutti.numpy's grouped_allreduce of
100 arrays of 40 KiB, tutti.numpy's allreduce_ of one 4000 KiB buffer) take turns every
`--block` calls, each call after a barrier. Prints, for every 20 calls of each, rank 0's
medians, how many of tutti's calls took shared memory's single copy (counter
shm_single_copy_calls) and mpi4py's median over the grouped call's (above 1: tutti faster).
"""

import argparse
import statistics
import time

import numpy
from mpi4py import MPI

import tutti.numpy as hvd

TENSORS, EACH = 100, 40960 // 4  # float32 elements per tensor


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls of each contender")
    parser.add_argument("--block", type=int, default=1, help="calls in a row of one contender")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    hvd.init()
    tensors = [numpy.ones(EACH, numpy.float32) for _ in range(TENSORS)]
    whole = numpy.ones(TENSORS * EACH, numpy.float32)
    one = numpy.ones(TENSORS * EACH, numpy.float32)
    contenders = [
        ("mpi4py 1 buffer", lambda: comm.Allreduce(MPI.IN_PLACE, whole, op=MPI.SUM)),
        ("tutti grouped", lambda: hvd.grouped_allreduce_(tensors, op=hvd.Sum, name="grouped")),
        ("tutti 1 buffer", lambda: hvd.allreduce_(one, op=hvd.Sum, name="one")),
    ]
    for _, call in contenders:  # page faults, first choices
        for _ in range(5):
            call()
    times = [[] for _ in contenders]
    single = [[] for _ in contenders]
    for _ in range(max(1, args.calls // args.block)):
        for index, (_, call) in enumerate(contenders):
            for _ in range(args.block):
                comm.Barrier()
                before = hvd.counters()["shm_single_copy_calls"]
                start = time.perf_counter()
                call()
                times[index].append(time.perf_counter() - start)
                single[index].append(hvd.counters()["shm_single_copy_calls"] - before)
    hvd.shutdown()
    if comm.rank != 0:
        return
    print("%d ranks, %d calls of each, %d in a row; per 20 calls: median us (single copies)"
          % (comm.size, len(times[0]), args.block))
    print("  ".join("%22s" % name for name, _ in contenders) + "  mpi4py / grouped")
    for at in range(0, len(times[0]), 20):
        medians = [statistics.median(t[at:at + 20]) for t in times]
        print("  ".join("%15.0f (%2d/20)" % (m * 1e6, sum(s[at:at + 20]))
                        for m, s in zip(medians, single)) + "  %.2fx" % (medians[0] / medians[1]))
    overall = [statistics.median(t) for t in times]
    print("all calls: %s; mpi4py / grouped %.2fx" % (
        ", ".join("%s %.0f us" % (name, m * 1e6) for (name, _), m in zip(contenders, overall)),
        overall[0] / overall[1]))


if __name__ == "__main__":
    main()
