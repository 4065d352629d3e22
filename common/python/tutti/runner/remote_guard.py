"""Runs one rank on a remote host and ties its life to tuttirun's ssh connection.

tuttirun starts `ssh HOST 'cd DIR && env VAR=... PYTHON -m tutti.runner.remote_guard CMD'`
and keeps the ssh process's stdin open for the whole job. This guard

- reads one line from stdin first: a JSON object of secret variables (the store's secret),
  so that secrets never appear on a command line, where `ps` on either host would show them;
- runs CMD in its own session with those variables added;
- stops that whole session (SIGTERM, then SIGKILL after a grace period) when stdin reaches
  EOF (tuttirun stopped the rank, exited or died, or the connection broke) or when the
  guard itself gets SIGTERM, SIGINT or SIGHUP;
- exits with CMD's exit code (128 + N when CMD died from signal N).
"""

import json
import os
import signal
import subprocess
import sys
import threading

from . import sessions

GRACE_SECONDS = 3.0


_MAX_SECRETS_LINE = 64 * 1024


def _read_line(fd):
    """One line from `fd`, read unbuffered (byte by byte: nothing beyond it is consumed)."""
    data = bytearray()
    while len(data) < _MAX_SECRETS_LINE:
        byte = os.read(fd, 1)
        if not byte:
            break
        data += byte
        if byte == b"\n":
            break
    return bytes(data)


def _read_secrets(fd):
    # Raw reads on the file descriptor: a daemon thread blocked in sys.stdin's buffered
    # reader would abort the interpreter at exit.
    line = _read_line(fd)
    if not line:
        return None
    try:
        secrets = json.loads(line)
    except ValueError:
        secrets = None
    if not isinstance(secrets, dict):
        sys.stderr.write("tutti remote_guard: the first line of stdin is not a JSON object\n")
        sys.exit(2)
    return {str(name): str(value) for name, value in secrets.items()}


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        sys.stderr.write("usage: python -m tutti.runner.remote_guard COMMAND [ARGS...]\n")
        return 2
    stdin = sys.stdin.fileno()
    secrets = _read_secrets(stdin)
    if secrets is None:
        return 128 + signal.SIGTERM  # stdin closed before the job even started
    stop = threading.Event()

    def watch_stdin():
        try:
            while os.read(stdin, 4096):
                pass
        except OSError:
            pass
        stop.set()

    def on_signal(signum, frame):
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    env = dict(os.environ)
    env.update(secrets)
    try:
        child = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        sys.stderr.write("tutti remote_guard: cannot start %s: %s\n"
                         % (argv[0], exc.strerror or exc))
        return 127
    threading.Thread(target=watch_stdin, daemon=True).start()
    while child.poll() is None:
        if stop.wait(0.1):
            sessions.stop_sessions([child.pid], GRACE_SECONDS)
            break
    returncode = child.wait()
    # Grandchildren that outlived the rank itself go too.
    sessions.stop_sessions([child.pid], GRACE_SECONDS)
    return sessions.describe_exit(returncode)[0]


if __name__ == "__main__":
    sys.exit(main())
