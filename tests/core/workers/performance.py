"""The core's performance and observability features on several ranks:
`performance.py <scenario> [argument]`.

  cache     a repeated request is negotiated once, then served from the response cache;
            a changed shape invalidates the entry; results stay right throughout
  nocache   the same with TUTTI_CACHE_CAPACITY=0: nothing is cached
  fusion    many async allreduces of interleaved dtypes, ops and scale factors, submitted
            together: every result right, and the core fused some of them
  timeline  run a few collectives, then start_timeline(argument) / stop_timeline() at run time
  stall     rank 1 submits 3 s late (TUTTI_STALL_CHECK_TIME_SECONDS=1 set by the test)
  stalldie  rank 1 never submits 'late'; the others get an error (stall shutdown time set)
  forever   allreduce until killed (the timeline must stay valid JSON)
  autotune  allreduce steps until rank 0's autotune converges; all ranks agree on the setting
  caller    blocking calls back to back (named and unnamed, allreduce, allgather, broadcast):
            right results, and cycles ran on the calling thread (tutti_run)
  followup  a step of two allreduces whose second the last rank submits late: right
            results; the other ranks opened a cycle at once after the first one (argument
            "yes") or never did ("no": the flag exchange does not run in shared memory)
  latewait  the last rank submits 2 s late; the others wait for it asleep: their processes
            use well under a quarter of a CPU meanwhile (polling in the exchange used a
            quarter to a half of one)
  cpushare  both ranks' calling threads are put on one CPU, masks left free, then call
            allreduce_ back to back: rank 1 moves to another CPU (counter shm_cpu_moves; at
            most 10 placements, since the scheduler sometimes separates them first), rank 0
            never does; argument "no" (shared memory off): nobody moves

Each rank prints "rank R: ok" when its checks pass, and an assertion error otherwise.
"""

import os
import sys
import time

import numpy as np

import tutti.numpy as hvd


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def check_sum(result, expected, what):
    assert np.allclose(result, expected, rtol=1e-3, atol=1e-3), "%s: %r != %r" % (
        what, result, expected)


def cache(rank, size, enabled=True):
    before = hvd.counters()
    for step in range(6):
        x = np.full(5, float(rank + step), np.float32)
        check_sum(hvd.allreduce(x, name="cached", op=hvd.Sum),
                  sum(r + step for r in range(size)), "step %d" % step)
    after = hvd.counters()
    hits = after["cache_hits"] - before["cache_hits"]
    misses = after["cache_misses"] - before["cache_misses"]
    if enabled:
        assert (hits, misses) == (5, 1), "hits %d, misses %d" % (hits, misses)
    else:
        assert (hits, misses) == (0, 6), "hits %d, misses %d" % (hits, misses)
    # A changed shape on one rank is caught, renegotiated, and the entry replaced.
    x = np.full(7 if rank == 0 else 5, 1.0, np.float32)
    try:
        hvd.allreduce(x, name="cached", op=hvd.Sum)
        raise AssertionError("a shape mismatch went through")
    except hvd.PreconditionError as e:
        assert "shape" in str(e), str(e)
    changed = hvd.counters()
    hits_after_change = []
    for step in range(3):
        before_step = hvd.counters()["cache_hits"]
        check_sum(hvd.allreduce(np.ones(9, np.float32), name="cached", op=hvd.Sum),
                  float(size), "after the change")
        hits_after_change.append(hvd.counters()["cache_hits"] - before_step)
    final = hvd.counters()
    if enabled:
        # (Counted from `before`: the core of a rank that is behind may apply rank 0's
        # invalidation before that rank's Python thread has read `after`.)
        assert final["cache_invalidations"] - before["cache_invalidations"] >= 1, final
        # The new shape is negotiated once, then served from the cache.
        assert hits_after_change == [0, 1, 1], (hits_after_change, final)
        # Rank 0's changed request is a miss. Other ranks offered the old shape: a hit if
        # their request arrived before the invalidation was agreed (it is then sent to the
        # coordinator), a miss if after.
        changed_hits = changed["cache_hits"] - after["cache_hits"]
        changed_misses = changed["cache_misses"] - after["cache_misses"]
        assert changed_hits + changed_misses == 1, changed
        assert changed_hits in ((0,) if rank == 0 else (0, 1)), changed
        assert final["cache_enabled"] == 1
    else:
        assert final["cache_hits"] == 0 and final["cache_enabled"] == 0, final


def fusion(rank, size):
    dtypes = [np.float32, np.float16, np.int32, np.float64]
    ops = [hvd.Sum, hvd.Max, hvd.Average]
    fused_before = hvd.counters()["fused_tensors"]
    for round_ in range(3):
        handles, expected = [], []
        for i in range(60):
            dtype = dtypes[i % len(dtypes)]
            op = ops[(i // 4) % len(ops)]
            prescale = 2.0 if i % 5 == 0 and dtype != np.int32 else 1.0
            values = [np.arange(i % 7 + 1) + r + i for r in range(size)]
            x = values[rank].astype(dtype)
            handles.append(hvd.allreduce_async(x, name="f.%d.%d" % (round_, i), op=op,
                                               prescale_factor=prescale))
            stacked = np.stack([v.astype(np.float64) * prescale for v in values])
            reference = {hvd.Sum: stacked.sum(0), hvd.Max: stacked.max(0),
                         hvd.Average: stacked.mean(0)}[op]
            expected.append((reference, dtype, op))
        for i, (handle, (reference, dtype, op)) in enumerate(zip(handles, expected)):
            result = hvd.synchronize(handle)
            assert result.dtype == dtype, (i, result.dtype)
            if dtype == np.int32 and op == hvd.Average:
                reference = np.trunc(reference)  # Horovod truncates integer averages
            check_sum(result.astype(np.float64), reference, "tensor %d" % i)
    counters = hvd.counters()
    assert counters["fused_tensors"] > fused_before, counters


def timeline(rank, size, path):
    x = np.ones(4, np.float32)
    hvd.allreduce(x, name="before.timeline")
    hvd.start_timeline(path)
    for step in range(3):
        hvd.allreduce(x, name="traced.allreduce")
        hvd.allgather(x, name="traced.allgather")
    handles = [hvd.allreduce_async(np.ones(8, np.float32), name="traced.fused.%d" % i)
               for i in range(10)]
    for handle in handles:
        hvd.synchronize(handle)
    hvd.stop_timeline()
    hvd.allreduce(x, name="after.timeline")


def stall(rank, size):
    if rank == 1:
        time.sleep(3)
    hvd.allreduce(np.ones(2, np.float32), name="late")


def stalldie(rank, size):
    if rank == 1:
        time.sleep(6)  # never submits 'late'; long enough for the others to give up
        return
    try:
        hvd.allreduce(np.ones(2, np.float32), name="late")
        raise AssertionError("the stalled allreduce completed")
    except hvd.PreconditionError as e:
        say("rank %d: PreconditionError: %s" % (rank, e))


def autotune(rank, size):
    grads = [np.ones(n, np.float32) for n in (1000, 50000, 3000, 200000, 10)]
    converged = 0
    steps = 0
    while not converged:
        handles = [hvd.allreduce_async(g, name="grad.%d" % i) for i, g in enumerate(grads)]
        for handle in handles:
            hvd.synchronize(handle)
        steps += 1
        assert steps < 3000, "autotune did not converge: %r" % hvd.counters()
        done = np.array([hvd.counters()["autotune_converged"] if rank == 0 else 0], np.int32)
        converged = int(hvd.allreduce(done, name="converged", op=hvd.Max)[0])
    # Every rank runs with the setting rank 0 settled on.
    for _ in range(3):
        hvd.allreduce(np.ones(3, np.float32), name="settle")
    c = hvd.counters()
    mine = np.array([c["cycle_time_us"], c["fusion_threshold_bytes"], c["cache_enabled"]],
                    np.int64)
    everyone = hvd.allgather(mine.reshape(1, 3), name="settings")
    assert (everyone == everyone[0]).all(), everyone
    if rank == 0:
        assert c["autotune_samples"] >= 2, c
        say("rank 0: setting %s after %d samples" % (mine.tolist(), c["autotune_samples"]))


def caller(rank, size):
    before = hvd.counters()["caller_cycles"]
    for step in range(100):
        x = np.full(3, float(rank + step), np.float32)
        name = "caller" if step % 2 else None  # cached, and negotiated every time
        check_sum(hvd.allreduce_(x, name=name, op=hvd.Sum),
                  sum(r + step for r in range(size)), "allreduce %d" % step)
        gathered = hvd.allgather(np.full(rank + 1, rank, np.int64))
        assert gathered.tolist() == [r for r in range(size) for _ in range(r + 1)], gathered
        assert hvd.broadcast(np.full(2, rank + step, np.int32), step % size).tolist() == \
            [step % size + step] * 2
    ran = hvd.counters()["caller_cycles"] - before
    assert ran > 0, "no cycle ran on the calling thread"
    say("rank %d: %d cycles ran on the calling thread" % (rank, ran))


def followup(rank, size, expected):
    before = hvd.counters()["follow_up_cycles"]
    late = rank == size - 1
    for step in range(3):
        first = hvd.allreduce_async(np.full(4, float(rank), np.float32), name="first",
                                    op=hvd.Sum)
        if late:
            hvd.synchronize(first)  # the others' "second" waits in flight meanwhile
            time.sleep(0.1)
        second = hvd.allreduce_async(np.full(4, float(rank + step), np.float32),
                                     name="second", op=hvd.Sum)
        check_sum(hvd.synchronize(first), sum(range(size)), "first %d" % step)
        check_sum(hvd.synchronize(second), sum(r + step for r in range(size)),
                  "second %d" % step)
    opened = hvd.counters()["follow_up_cycles"] - before
    if expected == "no":
        assert opened == 0, "%d follow-up cycles without shared memory" % opened
    elif not late:
        assert opened >= 3, "%d follow-up cycles in 3 split steps" % opened
    say("rank %d: %d follow-up cycles" % (rank, opened))


def latewait(rank, size):
    import resource

    def cpu_seconds():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    hvd.allreduce(np.ones(4, np.float32), name="warm")
    hvd.barrier()
    before, start = cpu_seconds(), time.monotonic()
    if rank == size - 1:
        time.sleep(2.0)
    check_sum(hvd.allreduce(np.full(4, float(rank), np.float32), name="late", op=hvd.Sum),
              sum(range(size)), "late")
    used, waited = cpu_seconds() - before, time.monotonic() - start
    if rank != size - 1:
        assert waited >= 1.9, "waited only %.2f s" % waited
        assert used < 0.3, "%.2f s of CPU while waiting %.2f s for a late rank" % (used, waited)
    say("rank %d: %.3f s of CPU in %.2f s" % (rank, used, waited))


def cpushare(rank, size, expected):
    allowed = os.sched_getaffinity(0)
    first = min(allowed)
    moved, placements = False, 0
    start = hvd.counters()["shm_cpu_moves"]
    x = np.zeros(1, np.float32)
    while not moved and placements < 10:
        placements += 1
        os.sched_setaffinity(0, {first})  # this thread only; it stays there after the reset
        os.sched_setaffinity(0, allowed)
        hvd.barrier()
        before = hvd.counters()["shm_cpu_moves"]
        for step in range(2000):
            x[0] = rank + step
            hvd.allreduce_(x, name="turns", op=hvd.Sum)
            assert x[0] == sum(range(size)) + size * step, (step, x[0])
        went = hvd.counters()["shm_cpu_moves"] - before
        moved = hvd.allreduce(np.array([went], np.int64), name="went", op=hvd.Max)[0] > 0
    moves = hvd.counters()["shm_cpu_moves"] - start
    assert os.sched_getaffinity(0) == allowed, "the affinity mask changed"
    if expected == "no" or rank == 0:
        assert moves == 0, "rank %d moved %d times" % (rank, moves)
    else:
        assert moves >= 1, "rank 1 never moved in %d placements" % placements
    say("rank %d: %d move(s) in %d placement(s)" % (rank, moves, placements))


def main():
    scenario = sys.argv[1]
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    if scenario == "cache":
        cache(rank, size)
    elif scenario == "nocache":
        cache(rank, size, enabled=False)
    elif scenario == "fusion":
        fusion(rank, size)
    elif scenario == "timeline":
        timeline(rank, size, sys.argv[2])
    elif scenario == "stall":
        stall(rank, size)
    elif scenario == "stalldie":
        stalldie(rank, size)
    elif scenario == "forever":
        say("rank %d: running" % rank)
        while True:
            hvd.allreduce(np.ones(16, np.float32), name="forever")
    elif scenario == "autotune":
        autotune(rank, size)
    elif scenario == "caller":
        caller(rank, size)
    elif scenario == "followup":
        followup(rank, size, sys.argv[2])
    elif scenario == "cpushare":
        cpushare(rank, size, sys.argv[2])
    elif scenario == "latewait":
        latewait(rank, size)
    else:
        raise SystemExit("unknown scenario %r" % scenario)
    say("rank %d: ok" % rank)
    hvd.shutdown()


if __name__ == "__main__":
    main()
