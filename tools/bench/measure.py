"""Timing loops. Every sample starts on all ranks together (an MPI barrier), is timed on
each rank, and counts as the slowest rank's time: a collective is done when it is done
everywhere. Rank 0 receives the samples; the other ranks get None. `comm` is an mpi4py
communicator, or anything with its rank, size, Barrier, gather and allgather (Horovod's job
over Gloo has no MPI: horovod_worker.HorovodComm)."""

import time


PROBES = 5  # timed calls that size a cell, unless the first is slow


def plan(comm, call, target_s, max_calls, samples, min_samples, budget_s):
    """(calls per sample, samples) from timed probe calls, the same on every rank.

    A sample holds enough back-to-back calls to fill about `target_s` (at most
    `max_calls`); slow cells get fewer samples (not below `min_samples`) so that one cell
    takes about `budget_s` at most. A call is timed PROBES times (once when the first call
    took more than a hundredth of the budget) and the median counts: one call that happened
    to wait for a wake-up would otherwise leave a latency cell with a few calls per sample,
    timing the ranks' skew after the barrier more than the calls.
    """
    comm.Barrier()
    times = [_timed(call)]
    if max(comm.allgather(times[0])) < budget_s / 100:
        times += [_timed(call) for _ in range(PROBES - 1)]
    took = max(max(comm.allgather(sorted(times)[len(times) // 2])), 1e-9)
    calls = max(1, min(max_calls, int(target_s / took)))
    affordable = int(budget_s / (calls * took))
    return calls, max(min_samples, min(samples, affordable))


def _timed(call):
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def samples(comm, call, count, calls=1, idle_s=0.0):
    """`count` samples of `calls` back-to-back calls each; seconds per call.

    idle_s: sleep after the barrier, before the timed call, so that every thread involved
    (MPI progress, the core's background thread) has gone idle: this measures an isolated
    call, not one that rides on the previous call's activity.
    """
    local = []
    for _ in range(count):
        comm.Barrier()
        if idle_s:
            time.sleep(idle_s)
        start = time.perf_counter()
        for _ in range(calls):
            call()
        local.append((time.perf_counter() - start) / calls)
    gathered = comm.gather(local, root=0)
    if comm.rank != 0:
        return None
    return [max(per_rank) for per_rank in zip(*gathered)]
