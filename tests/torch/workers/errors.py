"""Failures on 2 ranks: requests the ranks disagree about, reductions the core refuses,
a name reused while in flight, unsupported tensors, misused handles; the job must keep
working after each. Also checks that a grouped call is one request of the core, that
waiting for a request lets other Python threads run, that allreduce_'s native call
declines what is not plain and can be interrupted, that broadcast_'s and allgather's native
calls run plain calls and decline the rest, and that a request still pending at shutdown
fails.

Prints one line per check ("ok <label>: <message>" or "FAIL <label>: ..."); exits 1 on a failure.
"""

import os
import signal
import sys
import threading
import time

import numpy
import torch

import tutti.common
import tutti.numpy
import tutti.torch as hvd
from tutti.torch._native import entry as native

failures = []


RANK = []  # this process's rank, kept for reports made after shutdown()


def report(label, ok, detail):
    print("rank %d: %s %s: %s" % (RANK[0], "ok" if ok else "FAIL", label, detail), flush=True)
    if not ok:
        failures.append(label)


def expect(label, error, function, *words):
    """`function` must raise `error` (a RuntimeError) whose message contains every word."""
    try:
        function()
    except error as exc:
        missing = [w for w in words if w not in str(exc)]
        is_runtime = isinstance(exc, RuntimeError)
        report(label, not missing and is_runtime,
               "%s: %s%s" % (type(exc).__name__, exc, " (lacks %s)" % missing if missing else ""))
    except Exception as exc:
        report(label, False, "expected %s, got %s: %s" % (error.__name__, type(exc).__name__, exc))
    else:
        report(label, False, "expected %s, but the call succeeded" % error.__name__)


def still_works(label):
    got = hvd.allreduce(torch.ones(3) * (hvd.rank() + 1), op=hvd.Sum, name=label)
    expected = float(sum(range(1, hvd.size() + 1)))
    report(label, torch.equal(got, torch.full((3,), expected)), got.tolist())


def ranks_disagree():
    dtype = torch.float32 if hvd.rank() == 0 else torch.int32
    expect("dtype_mismatch", hvd.PreconditionError,
           lambda: hvd.allreduce(torch.ones(4, dtype=dtype), name="mismatch.dtype"), "dtype")
    still_works("after_dtype_mismatch")
    shape = (4,) if hvd.rank() == 0 else (2, 2)
    expect("shape_mismatch", hvd.PreconditionError,
           lambda: hvd.allreduce(torch.ones(shape), name="mismatch.shape"), "shape")
    # Unnamed requests are named by tutti.common.naming, with torch's prefix.
    expect("unnamed_shape_mismatch", hvd.PreconditionError,
           lambda: hvd.allreduce(torch.ones(shape)), "torch.allreduce.noname.", "shape")
    expect("name_not_a_string", hvd.InvalidArgumentError,
           lambda: hvd.allreduce(torch.ones(2), name=7), "name must be a non-empty string")
    handle = hvd.allreduce_async(torch.ones(2), name="mismatch.op",
                                 op=hvd.Sum if hvd.rank() == 0 else hvd.Max)
    expect("op_mismatch_async", hvd.PreconditionError, lambda: hvd.synchronize(handle))
    # Named in-place calls with plain arguments take the short paths; so do their errors.
    handle = hvd.allreduce_async_(torch.ones(shape), name="mismatch.shape.in_place")
    expect("shape_mismatch_in_place_async", hvd.PreconditionError,
           lambda: hvd.synchronize(handle), "mismatch.shape.in_place", "shape")
    expect("op_mismatch_in_place", hvd.PreconditionError,
           lambda: hvd.allreduce_(torch.ones(2), name="mismatch.op.in_place",
                                  op=hvd.Sum if hvd.rank() == 0 else hvd.Max))
    still_works("after_mismatches")


def refused_reductions():
    expect("bool_average", hvd.InvalidArgumentError,
           lambda: hvd.allreduce(torch.ones(3, dtype=torch.bool), op=hvd.Average), "bool")
    expect("bool_prescale", hvd.InvalidArgumentError,
           lambda: hvd.allreduce(torch.ones(3, dtype=torch.bool), op=hvd.Sum, prescale_factor=2.0),
           "bool")
    expect("meta_tensor", hvd.UnsupportedError,
           lambda: hvd.allreduce(torch.ones(3, device="meta")), "CPU")
    still_works("after_refusals")


def name_reused_in_flight():
    """Rank 1 submits late, so rank 0's first request is certainly still in flight when it
    reuses the name."""
    if hvd.rank() == 0:
        first = hvd.allreduce_async(torch.ones(2), name="dup", op=hvd.Sum)
        expect("duplicate_name", ValueError,
               lambda: hvd.allreduce_async(torch.ones(2), name="dup", op=hvd.Sum), "dup")
        expect("duplicate_name_in_place", ValueError,
               lambda: hvd.allreduce_async_(torch.ones(2), name="dup", op=hvd.Sum), "dup")
        expect("duplicate_name_blocking", ValueError,
               lambda: hvd.allreduce_(torch.ones(2), name="dup", op=hvd.Sum), "dup")
    else:
        time.sleep(0.5)
        first = hvd.allreduce_async(torch.ones(2), name="dup", op=hvd.Sum)
    got = hvd.synchronize(first)
    report("duplicate_name_first_completes", torch.equal(got, torch.full((2,), 2.0)), got.tolist())
    # The refused request took no number: the ranks' unnamed requests still line up.
    got = hvd.allreduce(torch.ones(2), op=hvd.Sum)
    report("unnamed_after_one_sided_failure", torch.equal(got, torch.full((2,), 2.0)), got.tolist())


def requests_done():
    return hvd.counters()["requests_done"]


def grouped_calls_are_one_request():
    """A grouped call of any length is one request of the core (one crossing into it), and
    so is each group of DistributedOptimizer(num_groups=...)."""
    tensors = [torch.full((i + 1,), float(hvd.rank() + 1)) for i in range(16)]
    for label, call in [
            ("grouped_allreduce_is_one_request",
             lambda: hvd.grouped_allreduce(tensors, op=hvd.Sum, name="one.ar")),
            ("grouped_allreduce__is_one_request",
             lambda: hvd.grouped_allreduce_([t.clone() for t in tensors], op=hvd.Sum)),
            ("grouped_allgather_is_one_request",
             lambda: hvd.grouped_allgather(tensors, name="one.ag")),
            ("grouped_reducescatter_is_one_request",
             lambda: hvd.grouped_reducescatter([t.repeat(2) for t in tensors], op=hvd.Sum))]:
        before = requests_done()
        results = call()
        report(label, requests_done() - before == 1 and len(results) == 16,
               "%d requests for 16 tensors" % (requests_done() - before))
    model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(4)])
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters(),
                                         num_groups=2)
    before = requests_done()
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    report("optimizer_group_is_one_request", requests_done() - before == 2,
           "8 gradients in 2 groups: %d requests" % (requests_done() - before))


def misused_handles():
    handle = hvd.allreduce_async(torch.ones(1), name="misuse")
    report("handle_is_an_int", isinstance(handle, int), type(handle).__mro__)
    expect("plain_int_refused", hvd.InvalidArgumentError, lambda: hvd.synchronize(int(handle)),
           "unknown tutti handle", "returned")
    hvd.synchronize(handle)
    expect("poll_after_synchronize", hvd.InvalidArgumentError, lambda: hvd.poll(handle),
           "unknown tutti handle", str(handle))
    # A request the other rank makes late: a wait with a timeout returns without it.
    if hvd.rank() == 1:
        time.sleep(0.5)
    late = hvd.allreduce_async(torch.ones(1), name="late", op=hvd.Sum)
    if hvd.rank() == 0:
        done, outputs, ints = native.wait(late, 0.0)
        report("wait_timeout_returns_pending", not done and not outputs and not ints,
               (done, outputs, ints))
    report("late_completes", hvd.synchronize(late).item() == 2.0, "")


def native_arguments_checked():
    """The native entry refuses malformed arguments with TypeError before anything is
    queued (the Python layer never passes them; a wrong one must not crash the process)."""
    good = [0, "native.args", "allreduce", 0, [torch.ones(1)], None, 1, 1.0, 1.0, 0, None]
    cases = {
        "too_few": good[:10],
        "inputs_not_a_list": good[:4] + [torch.ones(1)] + good[5:],
        "input_not_a_tensor": good[:4] + [[numpy.ones(1)]] + good[5:],
        "name_not_a_string": good[:1] + [7] + good[2:],
        "splits_not_ints": good[:10] + [["a"]],
    }
    for label, args in cases.items():
        try:
            native.enqueue(*args)
        except TypeError as exc:
            report("native_args." + label, True, "TypeError: %s" % exc)
        except Exception as exc:
            report("native_args." + label, False, "expected TypeError, got %r" % exc)
        else:
            report("native_args." + label, False, "expected TypeError, but it was queued")


def plain_runs_natively():
    """allreduce_'s and allreduce_async_'s native calls decline, having queued nothing,
    every argument that is not plain, and refuse a wrong argument count; Ctrl-C while it waits for a late peer
    raises KeyboardInterrupt, and the tensor still receives the sum once the peer comes."""
    x = torch.ones(4)
    plain = [x, "p", hvd.Sum, 1.0, 1.0, hvd.global_process_set]
    # Each variant changes one argument of the plain call above.
    changes = {"unnamed": (1, None), "empty_name": (1, ""), "adasum": (2, hvd.Adasum),
               "int_op": (2, int(hvd.Sum)), "int_factor": (3, 2), "other_set": (5, None),
               "strided": (0, torch.ones(8)[::2]), "sparse": (0, torch.ones(2, 2).to_sparse()),
               "numpy": (0, numpy.ones(4, numpy.float32))}
    declined = {}
    for label, (index, value) in changes.items():
        declined[label] = plain[:index] + [value] + plain[index + 1:]
    done = requests_done()
    results = {label: (native.run_plain(0, "allreduce", *args),
                       native.enqueue_plain(0, "allreduce", *args))
               for label, args in declined.items()}
    report("plain_run.declined", all(r == (False, None) for r in results.values())
           and requests_done() == done and torch.equal(x, torch.ones(4)), results)
    ran = native.run_plain(0, "allreduce", x, "plain.ran", *plain[2:])
    report("plain_run.ran", ran is True and torch.equal(x, torch.full((4,), 2.0)),
           "%r, %s" % (ran, x.tolist()))
    # allreduce_async_'s plain handle: an int, whose synchronize() returns the tensor once.
    handle = hvd.allreduce_async_(x, op=hvd.Sum, name="plain.async")
    got = hvd.synchronize(handle)
    report("plain_run.async", isinstance(handle, int) and got is x
           and torch.equal(x, torch.full((4,), 4.0)), "%r, %s" % (handle, x.tolist()))
    expect("plain_run.synchronize_twice", hvd.InvalidArgumentError,
           lambda: hvd.synchronize(handle), str(handle), "already synchronized")
    for function in (native.run_plain, native.enqueue_plain):
        label = "native_args.%s_count" % function.__name__
        try:
            function(0)
        except TypeError as exc:
            report(label, "8 arguments" in str(exc), "TypeError: %s" % exc)
        else:
            report(label, False, "expected TypeError")
    late = torch.full((3,), float(hvd.rank() + 1))
    if hvd.rank() == 0:
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            hvd.allreduce_(late, op=hvd.Sum, name="plain.late")
        except KeyboardInterrupt:
            report("plain_run.interrupted", True, "KeyboardInterrupt")
        else:
            report("plain_run.interrupted", False, "the call returned")
    else:
        time.sleep(1.5)  # rank 0 is interrupted meanwhile
        hvd.allreduce_(late, op=hvd.Sum, name="plain.late")
    hvd.allreduce(torch.ones(1), name="plain.after")  # rank 0's request is done by now
    report("plain_run.interrupted_sum", torch.equal(late, torch.full((3,), 3.0)), late.tolist())


def plain_broadcast_and_allgather():
    """broadcast_'s native call (run_plain with a root rank) and allgather's
    (allgather_plain) run plain calls, decline, having queued nothing, what is not plain
    (a root that is no exact int of 32 bits, no name, a strided tensor, a tensor that
    autograd follows), and raise the core's error for a root that names no rank; the
    declined calls' public functions still work, allgather with its gradient."""
    rank, size = hvd.rank(), hvd.size()
    x = torch.full((3,), float(rank + 1))
    ran = native.run_plain(2, "broadcast", x, "plain.bcast", None, 1.0, 1.0,
                           hvd.global_process_set, size - 1)
    report("plain_broadcast.ran", ran is True and torch.equal(x, torch.full((3,), float(size))),
           "%r, %s" % (ran, x.tolist()))
    done = requests_done()
    roots = {"bool": True, "float": 0.0, "tensor": torch.tensor(0), "huge": 2 ** 40}
    results = {label: native.run_plain(2, "broadcast", x, "plain.bcast.no", None, 1.0, 1.0,
                                       hvd.global_process_set, root)
               for label, root in roots.items()}
    report("plain_broadcast.declined", all(r is False for r in results.values())
           and requests_done() == done, results)
    expect("plain_broadcast.wrong_root", hvd.InvalidArgumentError,
           lambda: hvd.broadcast_(torch.ones(2), size + 3, name="plain.bcast.wrong"),
           "root_rank %d is out of range" % (size + 3))
    mine = torch.arange(3 * (rank + 1), dtype=torch.float64).view(rank + 1, 3) + 100 * rank
    expected = torch.cat([torch.arange(3 * (r + 1), dtype=torch.float64).view(r + 1, 3) + 100 * r
                          for r in range(size)])
    got = native.allgather_plain(mine, "plain.gather", hvd.global_process_set)
    report("plain_allgather.ran", got is not None and torch.equal(got, expected),
           got if got is None else got.tolist())
    follows = torch.ones(2, requires_grad=True)
    declined = {"unnamed": (mine, None), "empty_name": (mine, ""),
                "strided": (torch.ones(8)[::2], "p"), "autograd": (follows, "p"),
                "numpy": (numpy.ones(2, numpy.float32), "p")}
    done = requests_done()
    results = {label: native.allgather_plain(t, n, hvd.global_process_set)
               for label, (t, n) in declined.items()}
    results["other_set"] = native.allgather_plain(mine, "p", None)
    report("plain_allgather.declined", all(r is None for r in results.values())
           and requests_done() == done, results)
    gathered = hvd.allgather(follows, name="plain.gather.grad")
    gathered.sum().backward()
    # Its rows of the output gradient (ones), averaged over the ranks.
    report("plain_allgather.gradient", gathered.requires_grad
           and torch.equal(follows.grad, torch.ones(2)), follows.grad)
    expect("plain_allgather.mismatch", hvd.PreconditionError,
           lambda: hvd.allgather(torch.ones(1, rank + 2), name="plain.gather.mismatch"),
           "shape (all but the first dimension) differs")


def waiting_releases_the_gil():
    """While rank 0 waits in one long native wait (rank 1 submits 1.5 s late), a Python
    thread must run about as fast as while rank 0 sleeps; a wait that held the GIL would
    stop it for the whole wait."""
    ticks = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks[0] += 1

    hvd.allreduce(torch.ones(1), name="gil.start")  # both ranks start the check together
    if hvd.rank() == 1:
        time.sleep(1.5)
        hvd.synchronize(hvd.allreduce_async(torch.ones(2), name="gil", op=hvd.Sum))
        return
    counter = threading.Thread(target=count)
    counter.start()
    start, before = time.monotonic(), ticks[0]
    time.sleep(0.3)
    sleeping_rate = (ticks[0] - before) / (time.monotonic() - start)
    handle = hvd.allreduce_async(torch.ones(2), name="gil", op=hvd.Sum)
    start, before = time.monotonic(), ticks[0]
    done, _, _ = native.wait(handle, 30.0)
    waited = time.monotonic() - start
    waiting_rate = (ticks[0] - before) / waited
    stop.set()
    counter.join()
    report("gil_released_while_waiting",
           done and waited > 0.5 and waiting_rate > 0.2 * sleeping_rate,
           "waited %.2f s; %.0f ticks/s while waiting, %.0f while sleeping"
           % (waited, waiting_rate, sleeping_rate))


def blocking_calls_run_on_the_caller():
    """Synchronous calls go through tutti_run: back to back, their cycles run on the
    calling thread (the core's counter says so); while one waits for a late peer, other
    Python threads run; and a cycle the caller runs may complete another thread's
    tutti.numpy allgather, whose Python allocate callback then runs beside it."""
    before = tutti.common.counters()["caller_cycles"]
    for i in range(50):
        hvd.allreduce_(torch.ones(1), name="b2b.%d" % i, op=hvd.Sum)
    ran = tutti.common.counters()["caller_cycles"] - before
    report("blocking_calls_run_cycles_here", ran > 0, "%d cycles on this thread" % ran)

    ticks = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks[0] += 1

    hvd.allreduce(torch.ones(1), name="run.gil.start")
    if hvd.rank() == 1:
        time.sleep(1.5)
        hvd.allreduce(torch.ones(2), name="run.gil", op=hvd.Sum)
    else:
        counter = threading.Thread(target=count)
        counter.start()
        start, before = time.monotonic(), ticks[0]
        time.sleep(0.3)
        sleeping_rate = (ticks[0] - before) / (time.monotonic() - start)
        start, before = time.monotonic(), ticks[0]
        result = hvd.allreduce(torch.ones(2), name="run.gil", op=hvd.Sum)
        waited = time.monotonic() - start
        waiting_rate = (ticks[0] - before) / waited
        stop.set()
        counter.join()
        report("blocking_call_releases_the_gil",
               torch.equal(result, torch.full((2,), 2.0)) and waited > 0.5
               and waiting_rate > 0.2 * sleeping_rate,
               "waited %.2f s; %.0f ticks/s while waiting, %.0f while sleeping"
               % (waited, waiting_rate, sleeping_rate))

    gathered = []

    def numpy_allgathers():
        for i in range(20):
            handle = tutti.numpy.allgather_async(numpy.full(2, hvd.rank(), numpy.int32),
                                                 name="mixed.np.%d" % i)
            gathered.append(tutti.numpy.synchronize(handle).tolist())

    other = threading.Thread(target=numpy_allgathers)
    other.start()
    sums = [hvd.allreduce(torch.ones(1), name="mixed.torch.%d" % i, op=hvd.Sum).item()
            for i in range(20)]
    other.join(60)
    report("numpy_beside_blocking_torch",
           not other.is_alive() and sums == [2.0] * 20 and gathered == [[0, 0, 1, 1]] * 20,
           "alive %s, sums %s, gathered %s" % (other.is_alive(), sums[:3], gathered[:3]))

    # The asynchronous torch path queues with the GIL held while the core's thread runs
    # tutti.numpy's allocate callbacks, which need it: neither may wait for the other.
    del gathered[:]
    other = threading.Thread(target=numpy_allgathers)
    other.start()
    handles = [hvd.allreduce_async(torch.ones(1), name="mixed.async.%d" % i, op=hvd.Sum)
               for i in range(20)]
    sums = [hvd.synchronize(h).item() for h in handles]
    other.join(60)
    report("numpy_beside_async_torch",
           not other.is_alive() and sums == [2.0] * 20 and gathered == [[0, 0, 1, 1]] * 20,
           "alive %s, sums %s, gathered %s" % (other.is_alive(), sums[:3], gathered[:3]))


def main():
    hvd.init()
    RANK.append(hvd.rank())
    ranks_disagree()
    refused_reductions()
    name_reused_in_flight()
    grouped_calls_are_one_request()
    misused_handles()
    native_arguments_checked()
    plain_runs_natively()
    plain_broadcast_and_allgather()
    waiting_releases_the_gil()
    blocking_calls_run_on_the_caller()
    handle = hvd.allreduce_async(torch.ones(1), name="once")
    hvd.synchronize(handle)
    expect("synchronize_twice", hvd.InvalidArgumentError, lambda: hvd.synchronize(handle),
           str(handle))
    still_works("at_the_end")
    # A request only rank 0 makes is pending at shutdown: it fails, it does not hang.
    rank = hvd.rank()
    orphan = hvd.allreduce_async(torch.ones(2), name="orphan") if rank == 0 else None
    # Every rank completes one more allreduce, so no rank shuts down before rank 0 has
    # queued the orphan (otherwise its enqueue could already be refused as shut down).
    hvd.allreduce(torch.ones(1), name="orphan_queued")
    hvd.shutdown()
    if orphan is not None:
        expect("pending_at_shutdown", hvd.AbortedError, lambda: hvd.synchronize(orphan),
               "shut down")
    print("rank %d: %d failures" % (rank, len(failures)), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
