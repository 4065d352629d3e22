"""What workers/horovod_job.py reports, and a free port, for the launcher compat tests."""

import re
import socket

LINE = re.compile(r"\[(\d+)\]<stdout>: rank (\d+)/(\d+) cross=(\d+)/(\d+) sum=(\S+) "
                  r"store=(\S+) cycle=(\S+) autotune=(\S+) ib_disable=(\S+)$")


def reports(stdout):
    """{rank: (rank, size, cross rank, cross size, sum, store, cycle, autotune, ib)}."""
    found = {}
    for line in stdout.splitlines():
        match = LINE.search(line)
        if match:
            found[int(match.group(1))] = match.groups()[1:]
    return found


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
