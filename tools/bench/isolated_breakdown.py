"""Where an isolated 4-byte allreduce through tutti.numpy (or tutti.torch) spends its time.

    mpirun -np 2 python tools/bench/isolated_breakdown.py [--calls 80] [--idle-ms 10]
        [--api numpy|torch]

Like the benchmark's isolated test, each call follows a barrier and an idle pause. Prints,
per rank, the medians of: the asynchronous path (the Python submission `allreduce_async_`
and the wait in `synchronize`); the blocking path (`allreduce_` end to end, which runs the
cycle on the caller's thread through `tutti_run`); then mpi4py's own isolated `Allreduce`
under the same conditions, for scale (on the array, or the tensor's numpy view). The three
take turns call by call. Both APIs call the core from C (tutti.common._host_requests,
tutti.torch's native entry), so the C calls alone are not timed here:
tools/bench/c_api_latency measures them without Python.
"""

import argparse
import statistics
import time

import importlib

import numpy
from mpi4py import MPI


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=80)
    parser.add_argument("--idle-ms", type=float, default=10.0)
    parser.add_argument("--api", choices=("numpy", "torch"), default="numpy")
    args = parser.parse_args()
    hvd = importlib.import_module("tutti." + args.api)
    comm = MPI.COMM_WORLD
    hvd.init()
    if args.api == "torch":
        x = importlib.import_module("torch").zeros(1)
        x_array = x.numpy()  # the same memory, for mpi4py
    else:
        x = x_array = numpy.zeros(1, numpy.float32)
    for _ in range(20):
        hvd.allreduce_(x, op=hvd.Sum, name="isolated")
        hvd.synchronize(hvd.allreduce_async_(x, op=hvd.Sum, name="isolated"))
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
            comm.Allreduce(MPI.IN_PLACE, x_array)
            mpi.append(time.perf_counter() - start)
    hvd.shutdown()

    def us(values):
        return "%.0f us" % (statistics.median(values) * 1e6)

    line = ("rank %d (tutti.%s): async: submit %s, wait %s, total %s; blocking: allreduce_ %s; "
            "mpi4py Allreduce %s"
            % (comm.rank, args.api, us(submit), us(wait),
               us([s + w for s, w in zip(submit, wait)]), us(blocking), us(mpi)))
    lines = comm.gather(line)
    if comm.rank == 0:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
