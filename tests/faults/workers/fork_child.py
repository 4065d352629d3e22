"""fork() after init() (`fork_child.py exit|os_exit`).

Every rank makes an allreduce, then forks. The child tries an allreduce (it must fail at
once, saying to call init() in the child) and then leaves: with a normal exit (atexit hooks
run) or os._exit. The parent waits for it and then keeps training: 20 more allreduces and a
barrier. Prints "rank R: child said: <message>" and "rank R: parent ok after the child".
"""

import os
import sys
import time

import numpy as np

import tutti.numpy as hvd


def child(mode, rank):
    started = time.monotonic()
    try:
        hvd.allreduce(np.ones(4, np.float32), name="from.child")
        message = "FAIL: an allreduce in the child succeeded"
    except hvd.TuttiError as exc:
        message = "%s: %s (after %.1f s)" % (type(exc).__name__, exc, time.monotonic() - started)
    print("rank %d: child said: %s" % (rank, message), flush=True)
    if mode == "os_exit":
        os._exit(0)
    sys.exit(0)  # atexit hooks, tutti's included, run now


def main(mode):
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    got = hvd.allreduce(np.ones(4, np.float32), op=hvd.Sum, name="before")
    assert np.array_equal(got, np.full(4, size, np.float32))
    pid = os.fork()
    if pid == 0:
        child(mode, rank)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    for step in range(20):
        got = hvd.allreduce(np.full(1024, rank, np.float32), op=hvd.Sum, name="after.%d" % step)
        assert np.array_equal(got, np.full(1024, sum(range(size)), np.float32)), got
    hvd.barrier()
    print("rank %d: parent ok after the child" % rank, flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
