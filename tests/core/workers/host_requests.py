"""How tutti.numpy hands arrays to the core (tutti.common._host_requests), on 2 or 3 ranks:
`host_requests.py`.

1. arrays: read-only, non-contiguous (out of place), 0-d and empty inputs reduce correctly;
   an in-place call on a read-only array is refused before anything is queued, and so is
   a grouped in-place call with a read-only, strided or non-array member.
2. refused: a grouped call refused for its second array's dtype raises InvalidArgumentError,
   consumes no number of an unnamed request and leaves no request pending; the next
   unnamed request still matches across ranks.
3. misuse: the module's own argument checks raise TypeError with a message.
4. in_place_async: allreduce_async_ on a plain array (named, Sum, C-contiguous) returns a
   handle whose result is that very array, holding the sum; a handle dropped unwaited still
   completes and is released; a read-only array takes the general path and is refused
   with its InvalidArgumentError.
5. native_handle: allreduce_async_'s handle is native (_host_requests.InPlaceRequest):
   poll() and synchronize() as for any handle; wait(timeout) raises TimeoutError naming the
   request while a peer is late, and a later synchronize() still returns the sum; a
   request that fails (shapes differ across ranks) raises its PreconditionError from
   synchronize(); a handle dropped while its request waits for a late peer leaves record
   and array to the module until the core is done (the array then holds the sum); the
   module's argument checks raise TypeError.
6. single_copy_counter: with TUTTI_SHM_SINGLE_COPY=on (and TUTTI_TEST_SINGLE_COPY=1: the
   kernel permits it), a 4 MiB allreduce_ takes the single copy and the counter
   shm_single_copy_calls counts it; with TUTTI_SHM_SINGLE_COPY=off it stays 0. With
   TUTTI_SHM_STREAMING_STORES=on, the call that does not take the single copy streams
   into the segment and shm_streaming_calls counts it; with off it stays 0.
7. plain_run: allreduce_'s one native call (_host_requests.run_plain) runs a plain call
   (the array holds the sum); it and allreduce_async_'s (submit_plain) decline, having
   done nothing, every argument that is not plain (no name, an empty one, Adasum, an int
   op or factor, another process set, a read-only, strided, subclassed or complex array);
   a plain call whose name is still in flight is refused with the core's error, one whose
   shapes differ across ranks fails with its PreconditionError, and a wrong argument count
   raises TypeError.
8. interrupted: Ctrl-C (SIGINT) while allreduce_ waits for a late peer raises
   KeyboardInterrupt; the request stays kept with its array, which holds the sum once
   the peer joins, and is released at the next call. The same for allgather's native
   call, whose output the core then allocates on its own thread.
9. plain_broadcast: broadcast_'s one native call (run_plain with a root rank) overwrites
   the array with the root's; it declines a root that is not an exact int of 32 bits
   (bool, float, numpy integer, 2**40), having done nothing; a root that names no rank
   fails with the core's InvalidArgumentError.
10. plain_allgather: allgather's one native call (allgather_plain) returns the
   concatenation (first dimensions that differ by rank, a read-only input, every dtype
   the core allocates as numpy does); it declines what is not plain (no name, another
   set, a strided, subclassed or complex array, a list), having done nothing; trailing
   dimensions that differ across ranks fail with the core's PreconditionError.
Prints "rank R: <phase>: ..." lines and a summary; exits 1 on any failure.
"""

import os
import signal
import sys
import threading
import time

import numpy as np

import tutti.numpy as hvd
from reference import Checker, say
from tutti.common import _host_requests, core, handles


def arrays(check):
    size = check.size
    read_only = np.arange(6, dtype=np.float64).reshape(2, 3)
    read_only.flags.writeable = False
    check.equal("arrays.read_only", hvd.allreduce(read_only, op=hvd.Sum), read_only * size)
    strided = np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2]
    check.equal("arrays.strided", hvd.allreduce(strided, op=hvd.Sum), strided * size)
    check.equal("arrays.scalar", hvd.allreduce(np.float32(check.rank), op=hvd.Sum),
                np.asarray(sum(range(size)), dtype=np.float32))
    check.equal("arrays.empty", hvd.allreduce(np.ones((0, 3), np.float32)),
                np.ones((0, 3), np.float32))
    message = check.expect_error("arrays.in_place_read_only", hvd.InvalidArgumentError,
                                 lambda: hvd.allreduce_(read_only))
    say("rank %d: arrays: %s" % (check.rank, message))
    # A grouped in-place call leaves the checks to the native submit, and gives a refused
    # array the same error as the single calls.
    pending = len(handles._pending)
    for label, bad in (("read_only", read_only), ("strided", strided), ("list", [1.0, 2.0])):
        message = check.expect_error(
            "arrays.grouped_" + label, hvd.InvalidArgumentError,
            lambda bad=bad: hvd.grouped_allreduce_async_([np.ones(2), bad], name="bad"))
        say("rank %d: arrays: grouped %s: %s" % (check.rank, label, message))
    if len(handles._pending) != pending:
        check.fail("arrays.grouped_pending", "a refused grouped call left a request pending")


def refused(check):
    pending = len(handles._pending)
    message = check.expect_error(
        "refused.dtype", hvd.InvalidArgumentError,
        lambda: hvd.grouped_allreduce_async([np.ones(2), np.ones(2, np.complex64)]))
    say("rank %d: refused: %s" % (check.rank, message))
    if len(handles._pending) != pending:
        check.fail("refused.pending", "%d requests pending after a refused call, %d before"
                   % (len(handles._pending), pending))
    handle = hvd.grouped_allreduce_async([np.ones(2), np.ones(3)], op=hvd.Sum)
    if handle.name != "grouped_allreduce.noname.0":
        check.fail("refused.name", "the next unnamed request is %r" % handle.name)
    got = hvd.synchronize(handle)
    check.equal("refused.next", got[1], np.full(3, check.size, np.float64))
    say("rank %d: refused: next is %s" % (check.rank, handle.name))


def misuse(check):
    calls = {
        "inputs": lambda: _host_requests.submit(None, "allreduce", 0, 0, (np.ones(1),), None,
                                                False, 0, 1.0, 1.0, 0, None, None, None, 0,
                                                -1.0),
        "count": lambda: _host_requests.submit(None),
        "splits": lambda: _host_requests.submit(None, "alltoall", 0, 0, [np.ones(2)], None,
                                                True, 0, 1.0, 1.0, 0, np.ones(2), None, None,
                                                0, -1.0),
        "run_count": lambda: _host_requests.run_in_place("x", "allreduce"),
        "run_arrays": lambda: _host_requests.run_in_place("x", "allreduce", 0, 0, np.ones(2), 0,
                                                          1.0, 1.0, 0.2),
    }
    for label, call in calls.items():
        message = check.expect_error("misuse." + label, TypeError, call)
        say("rank %d: misuse: %s: %s" % (check.rank, label, message))


def in_place_async(check):
    size, rank = check.size, check.rank
    x = np.full((4, 5), rank + 1, np.float32)
    handle = hvd.allreduce_async_(x, op=hvd.Sum, name="async.plain")
    result = hvd.synchronize(handle)
    if result is not x:
        check.fail("in_place_async.same", "synchronize returned %r, not the array" % type(result))
    check.equal("in_place_async.sum", x, np.full((4, 5), sum(range(1, size + 1)), np.float32))
    dropped = np.full(3, rank + 1, np.float64)
    hvd.allreduce_async_(dropped, op=hvd.Average, name="async.dropped", postscale_factor=2.0)
    hvd.barrier()  # after the dropped request on every rank: it is done
    check.equal("in_place_async.dropped", dropped,
                np.full(3, 2.0 * sum(range(1, size + 1)) / size, np.float64))
    read_only = np.ones(2)
    read_only.flags.writeable = False
    message = check.expect_error("in_place_async.read_only", hvd.InvalidArgumentError,
                                 lambda: hvd.allreduce_async_(read_only, name="async.ro"))
    say("rank %d: in_place_async: %s" % (rank, message))


def native_handle(check):
    size, rank = check.size, check.rank
    total = sum(range(1, size + 1))
    x = np.full(4, rank + 1, np.float32)
    if rank == 0:
        handle = hvd.allreduce_async_(x, op=hvd.Sum, name="native.late")
        if type(handle) is not _host_requests.InPlaceRequest or handle.name != "native.late":
            check.fail("native_handle.type", "got %r named %r" % (type(handle), handle.name))
        if hvd.poll(handle):
            check.fail("native_handle.poll", "done while the peers have not submitted")
        message = check.expect_error("native_handle.timeout", TimeoutError,
                                     lambda: handle.wait(0.05))
        say("rank %d: native_handle: %s" % (rank, message))
    else:
        time.sleep(0.5)  # rank 0 times out meanwhile
        handle = hvd.allreduce_async_(x, op=hvd.Sum, name="native.late")
    if hvd.synchronize(handle) is not x or not hvd.poll(handle):
        check.fail("native_handle.result", "synchronize did not return the array, done")
    check.equal("native_handle.sum", x, np.full(4, total, np.float32))

    odd = hvd.allreduce_async_(np.ones(rank + 2, np.float32), name="native.mismatch")
    message = check.expect_error("native_handle.failed", hvd.PreconditionError,
                                 lambda: hvd.synchronize(odd))
    say("rank %d: native_handle: %s" % (rank, message))

    dropped = np.full(3, rank + 1, np.float64)
    kept = _host_requests.abandoned_count()
    if rank == 0:
        hvd.allreduce_async_(dropped, op=hvd.Sum, name="native.dropped")  # handle dropped
        if _host_requests.abandoned_count() != kept + 1:
            check.fail("native_handle.kept", "a dropped handle's request is not kept")
    else:
        time.sleep(0.3)
        hvd.synchronize(hvd.allreduce_async_(dropped, op=hvd.Sum, name="native.dropped"))
    hvd.barrier()  # every rank's request has completed: rank 0's core wrote `dropped`
    check.equal("native_handle.dropped", dropped, np.full(3, total, np.float64))
    hvd.synchronize(hvd.allreduce_async_(np.ones(1), name="native.after"))
    if _host_requests.abandoned_count() != 0:
        check.fail("native_handle.released", "%d dropped requests still kept after they "
                   "completed" % _host_requests.abandoned_count())

    calls = {"count": lambda: _host_requests.submit_plain("x"),
             "collective": lambda: _host_requests.submit_plain(
                 "allreduce", x, "native.bad", hvd.Sum, 1.0, 1.0, hvd.global_process_set)}
    for label, call in calls.items():
        message = check.expect_error("native_handle." + label, TypeError, call)
        say("rank %d: native_handle: %s: %s" % (rank, label, message))


class ArraySubclass(np.ndarray):
    pass


def plain_run(check):
    rank, size = check.rank, check.size
    x = np.ones(4, np.float32)
    read_only = np.ones(4, np.float32)
    read_only.flags.writeable = False
    declined = {
        "unnamed": (x, None, hvd.Sum, 1.0, 1.0, hvd.global_process_set),
        "empty_name": (x, "", hvd.Sum, 1.0, 1.0, hvd.global_process_set),
        "adasum": (x, "p", hvd.Adasum, 1.0, 1.0, hvd.global_process_set),
        "int_op": (x, "p", int(hvd.Sum), 1.0, 1.0, hvd.global_process_set),
        "int_factor": (x, "p", hvd.Sum, 2, 1.0, hvd.global_process_set),
        "other_set": (x, "p", hvd.Sum, 1.0, 1.0, None),
        "read_only": (read_only, "p", hvd.Sum, 1.0, 1.0, hvd.global_process_set),
        "strided": (np.ones(8, np.float32)[::2], "p", hvd.Sum, 1.0, 1.0, hvd.global_process_set),
        "subclass": (x.view(ArraySubclass), "p", hvd.Sum, 1.0, 1.0, hvd.global_process_set),
        "complex": (np.ones(2, np.complex64), "p", hvd.Sum, 1.0, 1.0, hvd.global_process_set),
    }
    done = hvd.counters()["requests_done"]
    for label, args in declined.items():
        if _host_requests.run_plain(core.ALLREDUCE, *args) is not False:
            check.fail("plain_run." + label, "run_plain did not decline")
        if _host_requests.submit_plain(core.ALLREDUCE, *args) is not None:
            check.fail("plain_run.submit_" + label, "submit_plain did not decline")
    if hvd.counters()["requests_done"] != done:
        check.fail("plain_run.declined", "a declined call ran a request")
    check.equal("plain_run.untouched", x, np.ones(4, np.float32))
    if _host_requests.run_plain(core.ALLREDUCE, x, "plain.ran", hvd.Sum, 1.0, 1.0,
                                hvd.global_process_set) is not True:
        check.fail("plain_run.ran", "a plain call was declined")
    check.equal("plain_run.ran_sum", x, np.full(4, size, np.float32))

    first = np.full(2, rank + 1, np.float32)
    if rank == 0:
        handle = hvd.allreduce_async_(first, op=hvd.Sum, name="plain.dup")
        message = check.expect_error(
            "plain_run.duplicate", hvd.InvalidArgumentError,
            lambda: hvd.allreduce_(np.ones(2, np.float32), op=hvd.Sum, name="plain.dup"))
        say("rank %d: plain_run: %s" % (rank, message))
    else:
        time.sleep(0.3)  # rank 0's request is still in flight when it reuses the name
        handle = hvd.allreduce_async_(first, op=hvd.Sum, name="plain.dup")
    hvd.synchronize(handle)
    check.equal("plain_run.first", first, np.full(2, sum(range(1, size + 1)), np.float32))

    message = check.expect_error(
        "plain_run.mismatch", hvd.PreconditionError,
        lambda: hvd.allreduce_(np.ones(rank + 2, np.float32), op=hvd.Sum, name="plain.mismatch"))
    say("rank %d: plain_run: %s" % (rank, message))
    message = check.expect_error("plain_run.count", TypeError,
                                 lambda: _host_requests.run_plain(core.ALLREDUCE))
    say("rank %d: plain_run: count: %s" % (rank, message))


def plain_broadcast(check):
    rank, size = check.rank, check.size
    root = size - 1
    x = np.full(5, rank + 1, np.int32)
    if _host_requests.run_plain(core.BROADCAST, x, "plain.bcast", hvd.Sum, 1.0, 1.0,
                                hvd.global_process_set, root) is not True:
        check.fail("plain_broadcast.ran", "a plain broadcast was declined")
    check.equal("plain_broadcast.root", x, np.full(5, root + 1, np.int32))
    done = hvd.counters()["requests_done"]
    for label, value in (("bool", True), ("float", 0.0), ("numpy_int", np.int64(0)),
                         ("huge", 2 ** 40)):
        if _host_requests.run_plain(core.BROADCAST, x, "plain.bcast.no", hvd.Sum, 1.0, 1.0,
                                    hvd.global_process_set, value) is not False:
            check.fail("plain_broadcast." + label, "run_plain did not decline")
    if hvd.counters()["requests_done"] != done:
        check.fail("plain_broadcast.declined", "a declined call ran a request")
    y = np.full(3, rank, np.float64)
    check.equal("plain_broadcast.public", hvd.broadcast_(y, 0, name="plain.bcast.public"),
                np.zeros(3, np.float64))
    message = check.expect_error("plain_broadcast.wrong_root", hvd.InvalidArgumentError,
                                 lambda: hvd.broadcast_(y, size + 3, name="plain.bcast.wrong"))
    say("rank %d: plain_broadcast: %s" % (rank, message))


def plain_allgather(check):
    rank, size = check.rank, check.size
    mine = np.arange((rank + 1) * 3, dtype=np.float32).reshape(rank + 1, 3) + 100 * rank
    mine.flags.writeable = False
    expected = np.concatenate([np.arange((r + 1) * 3, dtype=np.float32).reshape(r + 1, 3)
                               + 100 * r for r in range(size)])
    check.equal("plain_allgather.rows",
                _host_requests.allgather_plain(mine, "plain.gather", hvd.global_process_set),
                expected)
    for dtype in (np.uint8, np.int64, np.float64, np.bool_):
        got = hvd.allgather(np.ones(2, dtype), name="plain.gather.%s" % np.dtype(dtype).name)
        check.equal("plain_allgather." + np.dtype(dtype).name, got, np.ones(2 * size, dtype))
    x = np.ones(4, np.float32)
    declined = {
        "unnamed": (x, None, hvd.global_process_set),
        "empty_name": (x, "", hvd.global_process_set),
        "other_set": (x, "p", None),
        "strided": (np.ones(8, np.float32)[::2], "p", hvd.global_process_set),
        "subclass": (x.view(ArraySubclass), "p", hvd.global_process_set),
        "complex": (np.ones(2, np.complex64), "p", hvd.global_process_set),
        "list": ([1.0, 2.0], "p", hvd.global_process_set),
    }
    done = hvd.counters()["requests_done"]
    for label, args in declined.items():
        if _host_requests.allgather_plain(*args) is not None:
            check.fail("plain_allgather." + label, "allgather_plain did not decline")
    if hvd.counters()["requests_done"] != done:
        check.fail("plain_allgather.declined", "a declined call ran a request")
    message = check.expect_error(
        "plain_allgather.mismatch", hvd.PreconditionError,
        lambda: hvd.allgather(np.ones((1, rank + 2), np.float32), name="plain.gather.mismatch"))
    say("rank %d: plain_allgather: %s" % (rank, message))
    message = check.expect_error("plain_allgather.count", TypeError,
                                 lambda: _host_requests.allgather_plain(x))
    say("rank %d: plain_allgather: count: %s" % (rank, message))


def single_copy_counter(check):
    mode = os.environ.get("TUTTI_SHM_SINGLE_COPY")
    if mode not in ("on", "off"):
        return
    streaming = os.environ.get("TUTTI_SHM_STREAMING_STORES")
    before = hvd.counters()
    x = np.full(1 << 20, check.rank + 1, np.float32)
    hvd.allreduce_(x, op=hvd.Sum, name="single_copy.4MiB")
    check.equal("single_copy.sum", x, np.full(1 << 20, sum(range(1, check.size + 1)), np.float32))
    after = hvd.counters()
    took = after["shm_single_copy_calls"] - before["shm_single_copy_calls"]
    expected = 1 if mode == "on" and os.environ.get("TUTTI_TEST_SINGLE_COPY") == "1" else 0
    if took != expected:
        check.fail("single_copy.counter", "shm_single_copy_calls rose by %d, expected %d (mode %s)"
                   % (took, expected, mode))
    streamed = after["shm_streaming_calls"] - before["shm_streaming_calls"]
    if streaming in ("on", "off") and streamed != (1 - expected if streaming == "on" else 0):
        check.fail("single_copy.streaming", "shm_streaming_calls rose by %d (single copy %s, "
                   "streaming stores %s)" % (streamed, mode, streaming))
    say("rank %d: single_copy_counter: %s: %d, streaming stores %s: %d"
        % (check.rank, mode, took, streaming, streamed))


def interrupted(check):
    x = np.full(3, check.rank + 1, np.float64)
    kept = _host_requests.abandoned_count()
    if check.rank == 0:
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        check.expect_error("interrupted", KeyboardInterrupt,
                           lambda: hvd.allreduce_(x, op=hvd.Sum, name="late"))
        if _host_requests.abandoned_count() != kept + 1:
            check.fail("interrupted.kept", "the interrupted request is not kept")
    else:
        time.sleep(1.5)  # rank 0 is interrupted meanwhile
        hvd.allreduce_(x, op=hvd.Sum, name="late")
    hvd.barrier()  # every rank's request has completed: rank 0's core wrote x
    check.equal("interrupted.sum", x, np.full(3, sum(range(1, check.size + 1)), np.float64))
    hvd.allreduce_(np.ones(1), name="after")
    if _host_requests.abandoned_count() != 0:
        check.fail("interrupted.released", "%d interrupted requests still kept after they "
                   "completed" % _host_requests.abandoned_count())
    # allgather's native call: its output is allocated when the late peer arrives, on the
    # core's thread, and released with the record.
    mine = np.full(2, check.rank + 1, np.float32)
    if check.rank == 0:
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        check.expect_error("interrupted.gather", KeyboardInterrupt,
                           lambda: hvd.allgather(mine, name="late.gather"))
        if _host_requests.abandoned_count() != 1:
            check.fail("interrupted.gather_kept", "the interrupted allgather is not kept")
    else:
        time.sleep(1.5)
        check.equal("interrupted.gathered", hvd.allgather(mine, name="late.gather"),
                    np.repeat(np.arange(1, check.size + 1, dtype=np.float32), 2))
    hvd.barrier()
    hvd.allreduce_(np.ones(1), name="after.gather")
    if _host_requests.abandoned_count() != 0:
        check.fail("interrupted.gather_released", "the interrupted allgather is still kept")
    say("rank %d: interrupted: ok" % check.rank)


def main():
    hvd.init()
    check = Checker()
    arrays(check)
    refused(check)
    misuse(check)
    in_place_async(check)
    native_handle(check)
    plain_run(check)
    plain_broadcast(check)
    plain_allgather(check)
    single_copy_counter(check)
    interrupted(check)
    hvd.shutdown()
    return check.report()


if __name__ == "__main__":
    sys.exit(main())
