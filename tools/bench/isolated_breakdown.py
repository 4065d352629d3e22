"""Where an isolated 4-byte allreduce through tutti.numpy spends its time.

    mpirun -np 2 python tools/bench/isolated_breakdown.py [--calls 80] [--idle-ms 10]

Like the benchmark's isolated test, each call follows a barrier and an idle pause. Prints,
per rank, the medians of: the Python submission (`allreduce_async_`), the C call
`tutti_enqueue` inside it, and the wait in `synchronize`; then mpi4py's own isolated
`Allreduce` under the same conditions, for scale.
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
    enqueue_times = []
    enqueue = core.lib.tutti_enqueue

    def timed_enqueue(request):
        start = time.perf_counter()
        status = enqueue(request)
        enqueue_times.append(time.perf_counter() - start)
        return status

    core.lib.tutti_enqueue = timed_enqueue
    x = numpy.zeros(1, numpy.float32)
    for _ in range(20):
        hvd.allreduce_(x, op=hvd.Sum, name="isolated")
    del enqueue_times[:]
    submit, wait, mpi = [], [], []
    for _ in range(args.calls):
        comm.Barrier()
        time.sleep(args.idle_ms / 1e3)
        start = time.perf_counter()
        handle = hvd.allreduce_async_(x, op=hvd.Sum, name="isolated")
        submitted = time.perf_counter()
        hvd.synchronize(handle)
        submit.append(submitted - start)
        wait.append(time.perf_counter() - submitted)
    for _ in range(args.calls):
        comm.Barrier()
        time.sleep(args.idle_ms / 1e3)
        start = time.perf_counter()
        comm.Allreduce(MPI.IN_PLACE, x)
        mpi.append(time.perf_counter() - start)
    core.lib.tutti_enqueue = enqueue
    hvd.shutdown()

    def us(values):
        return "%.0f us" % (statistics.median(values) * 1e6)

    line = ("rank %d: submit %s (tutti_enqueue %s), wait %s, total %s; mpi4py Allreduce %s"
            % (comm.rank, us(submit), us(enqueue_times), us(wait),
               us([s + w for s, w in zip(submit, wait)]), us(mpi)))
    lines = comm.gather(line)
    if comm.rank == 0:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
