"""Lifecycle scenarios, one per run: `python lifecycle.py <scenario>`.

Each scenario prints lines the test reads; an unexpected outcome raises (exit status 1).
  before_init  every call that needs init fails with NotInitializedError naming the fix
  init_error   init() fails; prints "ERROR <class>: <message>"
  restart      init -> allreduce -> shutdown -> (every call fails) -> init -> allreduce ->
               shutdown
  single       a plain process: size 1, local controller, identity reductions, bad arguments
"""

import sys

import numpy as np

import tutti.numpy as hvd


def say(line):
    """Prints one line with a single write, so lines of different ranks never interleave."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def expect(error, function, *args, **kwargs):
    try:
        function(*args, **kwargs)
    except error as exc:
        return str(exc)
    raise AssertionError("%s%r did not raise %s" % (function.__name__, args, error.__name__))


def before_init():
    assert not hvd.is_initialized()
    assert hvd.controller() == ""
    assert hvd.background_thread_id() == 0
    for function in (hvd.rank, hvd.size, hvd.local_rank, hvd.local_size,
                     hvd.cross_rank, hvd.cross_size):
        say("%s: %s" % (function.__name__, expect(hvd.NotInitializedError, function)))
    message = expect(hvd.NotInitializedError, hvd.allreduce, np.ones(3), name="x")
    say("allreduce: %s" % message)


def init_error():
    try:
        hvd.init()
    except hvd.TuttiError as exc:
        say("ERROR %s: %s" % (type(exc).__name__, exc))
        assert not hvd.is_initialized()
        return
    raise AssertionError("init() succeeded")


def restart():
    for round_number in (1, 2):
        hvd.init()
        hvd.init()  # a second call while initialized does nothing
        rank, size = hvd.rank(), hvd.size()
        result = hvd.allreduce(np.full(4, rank + round_number, np.float64), op=hvd.Sum,
                               name="round")
        expected = sum(r + round_number for r in range(size))
        assert np.array_equal(result, np.full(4, expected)), result
        assert hvd.background_thread_id() != 0
        controller = hvd.controller()
        hvd.shutdown()
        assert not hvd.is_initialized()
        say("after shutdown: %s" % expect(hvd.NotInitializedError, hvd.rank))
        say("allreduce after shutdown: %s" % expect(
            hvd.NotInitializedError, hvd.allreduce, np.ones(2), name="late"))
        if round_number == 1:
            after_shutdown()
        say("round %d ok: rank %d/%d controller %s" % (round_number, rank, size, controller))
    hvd.shutdown()  # shutting down twice is harmless


def after_shutdown():
    """Every other call that needs a running core fails the same clear way."""
    x = np.ones((2, 2), np.float32)
    calls = {
        "allreduce_": lambda: hvd.allreduce_(x.copy()),
        "grouped_allreduce": lambda: hvd.grouped_allreduce([x, x]),
        "allgather": lambda: hvd.allgather(x),
        "grouped_allgather": lambda: hvd.grouped_allgather([x]),
        "broadcast": lambda: hvd.broadcast(x, 0),
        "broadcast_": lambda: hvd.broadcast_(x.copy(), 0),
        "alltoall": lambda: hvd.alltoall(x),
        "reducescatter": lambda: hvd.reducescatter(x),
        "grouped_reducescatter": lambda: hvd.grouped_reducescatter([x]),
        "barrier": hvd.barrier,
        "join": hvd.join,
        "add_process_set": lambda: hvd.add_process_set([0]),
        "process_set_size": hvd.global_process_set.size,
        "mpi_threads_supported": hvd.mpi_threads_supported,
    }
    for label, call in calls.items():
        say("%s after shutdown: %s" % (label, expect(hvd.NotInitializedError, call)))


def single():
    hvd.init()
    topology = (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(),
                hvd.cross_rank(), hvd.cross_size())
    assert topology == (0, 1, 0, 1, 0, 1), topology
    assert hvd.controller() == "local", hvd.controller()
    assert not hvd.mpi_enabled() and not hvd.gloo_enabled()
    assert hvd.background_thread_id() > 0
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for op in hvd.ReduceOp:
        assert np.array_equal(hvd.allreduce(x, op=op), x), op
    assert np.array_equal(hvd.allreduce(x, op=hvd.Sum, postscale_factor=2.0), 2 * x)
    # Bad arguments are refused with a message that names the problem.
    say("dtype: %s" % expect(hvd.InvalidArgumentError, hvd.allreduce, np.ones(2, np.complex64)))
    say("op: %s" % expect(hvd.InvalidArgumentError, hvd.allreduce, x, op=7))
    say("in place: %s" % expect(hvd.InvalidArgumentError, hvd.allreduce_, x[:, ::2]))
    say("name: %s" % expect(hvd.InvalidArgumentError, hvd.allreduce, x, name=""))
    say("scale: %s" % expect(hvd.InvalidArgumentError, hvd.allreduce, x,
                               prescale_factor=float("nan")))
    # Lists and other array-likes work out of place.
    assert np.array_equal(hvd.allreduce([1.0, 2.0], op=hvd.Sum), [1.0, 2.0])
    handle = hvd.allreduce_async(x, op=hvd.Max, name="async")
    assert np.array_equal(hvd.synchronize(handle, timeout=30), x)
    assert hvd.poll(handle)
    say("single ok: built mpi=%s gloo=%s nccl=%s cuda=%s" % (
        hvd.mpi_built(), hvd.gloo_built(), hvd.nccl_built(), hvd.cuda_built()))


if __name__ == "__main__":
    {"before_init": before_init, "init_error": init_error, "restart": restart,
     "single": single}[sys.argv[1]]()
