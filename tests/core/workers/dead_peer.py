"""A rank leaves mid-job: `dead_peer.py exit|crash`.

Every rank makes a few allreduces together; then the last rank leaves, either
  exit   returning from the script without shutdown() (tutti's exit hook tells the others), or
  crash  os._exit(0) at once, without any cleanup (no exit hooks run);
  hold   like crash, but each survivor, after its error, waits (without shutdown, so its
         connections stay open) until every survivor has had its error: only the core's
         abort of the failed generation can tell a survivor not connected to the dead
         rank's traffic; the ranks meet through files in the directory given as argument 2
         (also so that the last rank leaves only after every survivor's last good step);
while the others keep submitting. They must get an error, not hang: each prints
"rank R: error after S s: <Class>: <message>", shuts down and exits 0.
"""

import os
import sys
import time

import numpy as np

import tutti.numpy as hvd
from reference import say


def _marks(meeting, prefix):
    return [name for name in os.listdir(meeting) if name.startswith(prefix)]


def main(mode):
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    for step in range(3):
        got = hvd.allreduce(np.ones(4, np.float32), op=hvd.Sum, name="before.%d" % step)
        assert np.array_equal(got, np.full(4, size, np.float32)), got
    say("rank %d: 3 steps done" % rank)
    meeting = sys.argv[2] if mode == "hold" else None
    if meeting:
        # The dead rank leaves only once every survivor has its last result: a peer that
        # vanishes while another still reads its final bytes fails that earlier call instead.
        open(os.path.join(meeting, "stepped.%d" % rank), "w").close()
    if rank == size - 1:
        if meeting:
            while len(_marks(meeting, "stepped.")) < size:
                time.sleep(0.05)  # the test's deadline bounds this wait
        if mode in ("crash", "hold"):
            os._exit(0)  # no cleanup at all; a zero status keeps launchers from killing the others
        return 0  # no shutdown(): the exit hook stops tutti and tells the peers
    started = time.monotonic()
    try:
        for step in range(1000):
            hvd.synchronize(hvd.allreduce_async(np.ones(4, np.float32), name="after.%d" % step),
                            timeout=120)
    except hvd.TuttiError as exc:
        say("rank %d: error after %.1f s: %s: %s" % (
            rank, time.monotonic() - started, type(exc).__name__, exc))
    else:
        say("rank %d: FAIL no error although rank %d left" % (rank, size - 1))
        return 1
    if meeting:
        open(os.path.join(meeting, "errored.%d" % rank), "w").close()
        while len(_marks(meeting, "errored.")) < size - 1:
            time.sleep(0.05)  # the test's deadline bounds this wait
    hvd.shutdown()
    say("rank %d: shut down" % rank)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
