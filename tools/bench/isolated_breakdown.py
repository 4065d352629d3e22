"""Where an isolated 4-byte allreduce through tutti.numpy spends its time.

    mpirun -np 2 python tools/bench/isolated_breakdown.py [--calls 80] [--idle-ms 10]

Like the benchmark's isolated test, each call follows a barrier and an idle pause. Prints,
per rank, the medians of: the asynchronous path (the Python submission `allreduce_async_`,
the C call `tutti_enqueue` inside it, and the wait in `synchronize`); the blocking path
(`allreduce_` end to end, and the C call `tutti_run` inside it, which runs the cycle on the
caller's thread); then mpi4py's own isolated `Allreduce` under the same conditions, for
scale. The three take turns call by call.
"""

import argparse
import statistics
import time

import numpy
from mpi4py import MPI

import tutti.numpy as hvd
from tutti.common import core


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=80)
    parser.add_argument("--idle-ms", type=float, default=10.0)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    hvd.init()
    timed = {"tutti_enqueue": [], "tutti_run": []}
    originals = {name: getattr(core.lib, name) for name in timed}

    def timing(name):
        function = originals[name]

        def timed_call(*args):
            start = time.perf_counter()
            status = function(*args)
            timed[name].append(time.perf_counter() - start)
            return status
        return timed_call

    for name in timed:
        setattr(core.lib, name, timing(name))
    x = numpy.zeros(1, numpy.float32)
    for _ in range(20):
        hvd.allreduce_(x, op=hvd.Sum, name="isolated")
        hvd.synchronize(hvd.allreduce_async_(x, op=hvd.Sum, name="isolated"))
    for values in timed.values():
        del values[:]
    submit, wait, blocking, mpi = [], [], [], []
    for call in range(3 * args.calls):
        comm.Barrier()
        time.sleep(args.idle_ms / 1e3)
        start = time.perf_counter()
        if call % 3 == 0:
            handle = hvd.allreduce_async_(x, op=hvd.Sum, name="isolated")
            submitted = time.perf_counter()
            hvd.synchronize(handle)
            submit.append(submitted - start)
            wait.append(time.perf_counter() - submitted)
        elif call % 3 == 1:
            hvd.allreduce_(x, op=hvd.Sum, name="isolated")
            blocking.append(time.perf_counter() - start)
        else:
            comm.Allreduce(MPI.IN_PLACE, x)
            mpi.append(time.perf_counter() - start)
    for name, function in originals.items():
        setattr(core.lib, name, function)
    hvd.shutdown()

    def us(values):
        return "%.0f us" % (statistics.median(values) * 1e6)

    line = ("rank %d: async: submit %s (tutti_enqueue %s), wait %s, total %s; blocking: "
            "allreduce_ %s (tutti_run %s); mpi4py Allreduce %s"
            % (comm.rank, us(submit), us(timed["tutti_enqueue"]), us(wait),
               us([s + w for s, w in zip(submit, wait)]), us(blocking), us(timed["tutti_run"]),
               us(mpi)))
    lines = comm.gather(line)
    if comm.rank == 0:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
