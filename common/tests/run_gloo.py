"""Runs a command as N ranks of a Gloo job on this host, with a store from store_server.py,
the way tuttirun would (same environment contract). Exits with the first non-zero exit
status, or 124 when the ranks did not finish within --timeout seconds.

    python3 run_gloo.py -np 3 [--timeout 120] [--hosts 2] -- ./allreduce_worker 3

--hosts H splits the ranks into H simulated hosts (consecutive ranks, as even as possible):
each rank's TUTTI_LOCAL_*/TUTTI_CROSS_* say which, the way tuttirun sets them for real hosts.
"""

import argparse
import os
import secrets
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import store_server  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-np", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--hosts", type=int, default=1)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    secret = secrets.token_hex(16)
    server = store_server.start(secret)
    procs = []
    host_of = [rank * args.hosts // args.np for rank in range(args.np)]
    for rank in range(args.np):
        host = host_of[rank]
        env = dict(os.environ)
        env.update(
            TUTTI_CONTROLLER="gloo",
            TUTTI_RANK=str(rank),
            TUTTI_SIZE=str(args.np),
            TUTTI_LOCAL_RANK=str(host_of[:rank].count(host)),
            TUTTI_LOCAL_SIZE=str(host_of.count(host)),
            TUTTI_CROSS_RANK=str(host),
            TUTTI_CROSS_SIZE=str(args.hosts),
            TUTTI_GLOO_RENDEZVOUS_ADDR="127.0.0.1",
            TUTTI_GLOO_RENDEZVOUS_PORT=str(server.server_address[1]),
            TUTTI_GLOO_SECRET=secret,
        )
        procs.append(subprocess.Popen(command, env=env))
    deadline = time.monotonic() + args.timeout
    status = 0
    for proc in procs:
        try:
            code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print("run_gloo: ranks did not finish within %.0f s" % args.timeout, file=sys.stderr)
            for p in procs:
                p.kill()
            return 124
        if code != 0 and status == 0:
            status = code
    return status


if __name__ == "__main__":
    sys.exit(main())
