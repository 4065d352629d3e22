"""Waits for the file GO to exist (bounded), then init(), a few allreduces, shutdown().
(`allreduce_after_go.py GO`; prints "rank R: job formed, allreduce ok".)"""

import os
import sys
import time

import numpy as np

import tutti.numpy as hvd


def main(go):
    deadline = time.monotonic() + 120
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            sys.exit("no go file %s after 120 s" % go)
        time.sleep(0.05)
    hvd.init()
    for step in range(3):
        got = hvd.allreduce(np.ones(8, np.float32), op=hvd.Sum, name="step.%d" % step)
        assert np.array_equal(got, np.full(8, hvd.size(), np.float32)), got
    print("rank %d: job formed, allreduce ok" % hvd.rank(), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
