"""One rank misbehaves after three good allreduces (`peer_fault.py MODE`, 3 ranks):

  kill      the last rank SIGKILLs itself (as the OOM killer would)
  stop      the last rank SIGSTOPs itself (alive but silent; the test resumes nothing)
  hang      the last rank sleeps without submitting (stall warnings, then stall shutdown)
  mismatch  the last rank submits a different shape under the same name

The others keep submitting; each prints "rank R: error after S s: <Class>: <message>" and
exits 0 (3 in modes stop and hang, so that the launcher ends the job and the stopped rank with it). Memory is not at stake: tensors are 64 KiB.
"""

import os
import signal
import sys
import time

import numpy as np

import tutti.numpy as hvd


def main(mode):
    if mode == "kill":
        # The launcher stops the job as soon as it sees a rank die (SIGTERM, then SIGKILL
        # after its grace time); ignore the SIGTERM so the survivors' own error, which is
        # what this scenario checks, is reported whichever comes first.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    last = rank == size - 1
    started = time.monotonic()
    try:
        # A survivor may still be finishing the third allreduce when the last rank, done
        # with it, misbehaves (a killed peer's socket can be reset before its last bytes
        # are read): an error there is the same failure, reported the same way.
        for step in range(3):
            hvd.allreduce(np.ones(16384, np.float32), name="before.%d" % step)
        print("rank %d: 3 steps done" % rank, flush=True)
        if last and mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if last and mode == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        if last and mode == "hang":
            time.sleep(600)
        shape = (16384 + (1 if last and mode == "mismatch" else 0),)
        started = time.monotonic()
        for step in range(100000):
            hvd.allreduce(np.ones(shape, np.float32), name="after.%d" % step)
    except hvd.TuttiError as exc:
        print("rank %d: error after %.1f s: %s: %s"
              % (rank, time.monotonic() - started, type(exc).__name__, exc), flush=True)
    else:
        print("rank %d: FAIL no error" % rank, flush=True)
    if mode in ("stop", "hang"):
        # A failing rank makes tuttirun stop the job, the stuck rank included. Wait first:
        # the other survivor's own error (what the test checks) may come a moment later,
        # and tuttirun would otherwise end it before it can print that error.
        time.sleep(5)
        os._exit(3)
    if mode == "kill":
        os._exit(0)  # a peer is gone or stuck: leave without the shutdown handshake
    hvd.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
