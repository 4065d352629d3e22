"""A rank that starts a grandchild, says `ready` and then waits, for stop tests.

    stubborn.py MARKER [--fail-rank R --code C] [--ignore-term]

The grandchild (and this process) carry MARKER on their command lines so that a test can
find survivors. With --fail-rank, rank R exits with code C shortly after `ready`; with
--ignore-term, SIGTERM is ignored (only SIGKILL stops the rank).
"""

import argparse
import os
import signal
import subprocess
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("marker")
parser.add_argument("--fail-rank", type=int, default=-1)
parser.add_argument("--code", type=int, default=3)
parser.add_argument("--ignore-term", action="store_true")
args = parser.parse_args()
rank = int(os.environ.get("TUTTI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or 0)
if args.ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child_code = "import signal, time\n%s\ntime.sleep(120)\n" % (
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)" if args.ignore_term else "")
subprocess.Popen([sys.executable, "-c", child_code, args.marker])
print("ready rank %d" % rank, flush=True)
if rank == args.fail_rank:
    time.sleep(0.5)
    sys.exit(args.code)
time.sleep(120)
