"""Where 100 tensors of 40 KiB submitted together through tutti.torch (or tutti.numpy)
spend their time.

    mpirun -np 2 python tools/bench/submit_breakdown.py [--steps 300] [--tensors 100]
                                 [--elements 10240] [--barrier] [--api torch|numpy]

A step submits every tensor with `allreduce_async_` (Sum, named), then synchronizes the
handles in order, as DistributedOptimizer's hooks and the benchmark's 100 x 40 KiB test do.
Rank 0 prints the medians over the steps of: submitting, the first synchronize (the cycle
that reduces the tensors), the other synchronizes, and the whole step, each per step and
per tensor; the same step through the native entry alone (tutti.torch's `enqueue` and `wait`
with prepared arguments: what the Python layer adds is the difference); the same tensors in
one `grouped_allreduce_async_` call and its one synchronize; and the core's counters per
step (cycles, fused tensors). `--elements 1` makes every tensor 4 bytes, so the step is
almost all per-tensor cost. With --barrier each step starts after an
mpi4py barrier, as the benchmark's samples do; without it, steps follow each other.
`--api numpy` submits numpy arrays through tutti.numpy (no native-entry row).
"""

import argparse
import statistics
import time

import numpy
import torch

import tutti.numpy
import tutti.torch
from tutti.common import observability
from tutti.common.core import Collective, ReduceCode
from tutti.torch._native import entry


def median_us(samples, index):
    return statistics.median(sample[index] for sample in samples) * 1e6


def run_steps(steps, pause, submit, wait):
    samples = []
    for _ in range(steps):
        pause()
        start = time.perf_counter()
        handles = submit()
        submitted = time.perf_counter()
        wait(handles[0])
        first = time.perf_counter()
        for handle in handles[1:]:
            wait(handle)
        end = time.perf_counter()
        samples.append((submitted - start, first - submitted, end - first, end - start))
    return samples


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--tensors", type=int, default=100)
    parser.add_argument("--elements", type=int, default=10240, help="float32 per tensor")
    parser.add_argument("--barrier", action="store_true")
    parser.add_argument("--api", choices=("torch", "numpy"), default="torch")
    args = parser.parse_args()
    hvd = tutti.numpy if args.api == "numpy" else tutti.torch
    hvd.init()
    pause = lambda: None  # noqa: E731
    if args.barrier:
        from mpi4py import MPI

        pause = MPI.COMM_WORLD.Barrier
    zeros = (lambda: numpy.zeros(args.elements, numpy.float32)) if args.api == "numpy" else (
        lambda: torch.zeros(args.elements))
    tensors = [zeros() for _ in range(args.tensors)]
    names = ["breakdown.%d" % i for i in range(args.tensors)]

    def public_submit():
        return [hvd.allreduce_async_(t, op=hvd.Sum, name=n) for t, n in zip(tensors, names)]

    arguments = [(int(Collective.ALLREDUCE), "breakdown.native.%d" % i, "allreduce", 0, [t], [t],
                  int(ReduceCode.SUM), 1.0, 1.0, 0, None) for i, t in enumerate(tensors)]

    def native_submit():
        return [entry.enqueue(*a) for a in arguments]

    def native_wait(handle):
        while not entry.wait(handle, 0.5)[0]:
            pass

    def grouped_submit():
        return [hvd.grouped_allreduce_async_(tensors, op=hvd.Sum, name="breakdown.grouped")]

    parts = [("tutti." + args.api, public_submit, hvd.synchronize),
             ("native entry", native_submit, native_wait),
             ("grouped call", grouped_submit, hvd.synchronize)]
    if args.api == "numpy":  # the native entry is tutti.torch's
        del parts[1]
    rows = []
    for label, submit, wait in parts:
        run_steps(30, pause, submit, wait)  # warm-up: names cached, buffers touched
        hvd.allreduce(zeros()[:1], name="breakdown.sync")
        before = observability.counters()
        samples = run_steps(args.steps, pause, submit, wait)
        after = observability.counters()
        per_step = {k: (after[k] - before[k]) / args.steps for k in ("cycles", "fused_tensors")}
        rows.append((label, [median_us(samples, i) for i in range(4)], per_step))
    if hvd.rank() != 0:
        return
    n = args.tensors
    size = args.elements * 4
    size = "%g KiB" % (size / 1024) if size >= 1024 else "%d B" % size
    print("%d x %s allreduce_async_ then synchronize, %d ranks, %d steps%s (medians, rank 0)"
          % (n, size, hvd.size(), args.steps, ", barrier before each" if args.barrier else ""))
    for label, (submit, first, rest, step), per_step in rows:
        print("%-12s submit %4.0f us (%.1f us/tensor), first synchronize %4.0f us, other "
              "synchronizes %4.0f us (%.1f us/tensor), step %4.0f us; per step %.2f cycles, "
              "%.1f fused tensors" % (label, submit, submit / n, first, rest,
                                      rest / max(n - 1, 1), step, per_step["cycles"],
                                      per_step["fused_tensors"]))

if __name__ == "__main__":
    main()
