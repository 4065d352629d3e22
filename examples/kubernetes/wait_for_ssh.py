"""Waits until every host given on the command line accepts connections on port 22.

Pod 0 of the Indexed Job runs it before tuttirun: the other pods' DNS names appear and
their sshd starts a little after pod 0 starts. Exits 1 after 300 s.
"""

import socket
import sys
import time

DEADLINE_S = 300


def main(hosts):
    deadline = time.monotonic() + DEADLINE_S
    for host in hosts:
        while True:
            try:
                socket.create_connection((host, 22), timeout=2).close()
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    sys.exit("wait_for_ssh: %s:22 not reachable after %d s (%s)"
                             % (host, DEADLINE_S, exc))
                time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
