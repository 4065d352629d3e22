"""Load without faults (`load.py inflight N | loop STEPS`, any number of ranks):

  inflight  N allreduces submitted before any is waited for, then all synchronized
  loop      STEPS allreduces one after another; the process's resident memory, open file
            descriptors and threads are read after a warm-up (STEPS / 10) and at the end

Prints "rank R: inflight ok" or "rank R: loop rss_kib A B fds A B threads A B".
"""

import os
import sys

import numpy as np

import tutti.numpy as hvd


def resources():
    with open("/proc/self/status") as handle:
        status = dict(line.split(":", 1) for line in handle)
    rss = int(status["VmRSS"].split()[0])
    threads = int(status["Threads"])
    return rss, len(os.listdir("/proc/self/fd")), threads


def inflight(count):
    rank, size = hvd.rank(), hvd.size()
    arrays = [np.full(4, i % 7, np.float32) for i in range(count)]
    handles = [hvd.allreduce_async(a, op=hvd.Sum, name="inflight.%d" % i)
               for i, a in enumerate(arrays)]
    for i, handle in enumerate(handles):
        got = hvd.synchronize(handle)
        assert np.array_equal(got, np.full(4, (i % 7) * size, np.float32)), (i, got)
    print("rank %d: inflight ok" % rank, flush=True)


def loop(steps):
    rank = hvd.rank()
    data = np.ones(256, np.float32)
    warm = steps // 10
    for step in range(steps):
        hvd.allreduce(data, op=hvd.Sum, name="loop")
        if step == warm:
            before = resources()
    after = resources()
    print("rank %d: loop rss_kib %d %d fds %d %d threads %d %d"
          % ((rank,) + tuple(v for pair in zip(before, after) for v in pair)), flush=True)


def main(mode, count):
    hvd.init()
    (inflight if mode == "inflight" else loop)(count)
    hvd.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
