"""Load that used to be fine and must stay so: 10,000 requests in flight at once, and a
20,000-step loop whose memory, file descriptors and threads stay flat (2 ranks, Gloo)."""

import re
import sys

import launch
from scenario import scenario

WORKER = launch.worker("workers/load.py")
# Resident memory may move a little (allocator, numpy's caches); a leak of 128 bytes per
# step would add more than this over the 18,000 measured steps.
RSS_SLACK_KIB = 2048


@scenario("ten-thousand-in-flight")
def test_ten_thousand_requests_in_flight():
    result = launch.run_ranks(2, [sys.executable, WORKER, "inflight", "10000"], "gloo",
                              timeout=240)
    assert result.returncode == 0, launch.describe(result)
    for rank in range(2):
        assert "rank %d: inflight ok" % rank in result.stdout, launch.describe(result)


@scenario("long-loop-flat-resources")
def test_a_long_loop_keeps_memory_fds_and_threads_flat():
    result = launch.run_ranks(2, [sys.executable, WORKER, "loop", "20000"], "gloo",
                              timeout=280)
    assert result.returncode == 0, launch.describe(result)
    rows = re.findall(r"rank (\d): loop rss_kib (\d+) (\d+) fds (\d+) (\d+) threads (\d+) (\d+)",
                      result.stdout)
    assert len(rows) == 2, launch.describe(result)
    for rank, rss0, rss1, fd0, fd1, th0, th1 in rows:
        assert int(rss1) - int(rss0) < RSS_SLACK_KIB, (rank, rss0, rss1)
        assert fd0 == fd1, (rank, fd0, fd1)
        assert th0 == th1, (rank, th0, th1)
