"""Stops a job's processes when tuttirun dies without stopping them itself.

tuttirun starts `python -m tutti.runner.reaper GRACE` in a session of its own, with a pipe
on its stdin, and writes the pid of every process it starts (each leads a session) as one
line. When tuttirun finishes normally it writes "done" and closes the pipe; the reaper then
just exits. When the pipe closes without "done" (tuttirun was killed: SIGKILL, the OOM
killer, a crash), the reaper stops every session it was told about, SIGTERM and then
SIGKILL after GRACE seconds, so that no rank, mpirun or anything they started outlives the
launcher. Local ranks thus get the same guarantee that remote_guard gives remote ranks.
"""

import os
import signal
import subprocess
import sys

from . import sessions

DONE = b"done"


def start(grace_seconds):
    """Starts a reaper; returns its Popen (write pids with tell(), finish with finish())."""
    # It imports this very tutti package, wherever the launcher found it.
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [package_root, env.get("PYTHONPATH")] if p)
    # Its own session, so that signals for the launcher's process group do not reach it, and
    # no stdout/stderr, so that it never holds the launcher's output pipes open.
    return subprocess.Popen(
        [sys.executable, "-m", "tutti.runner.reaper", str(grace_seconds)], env=env,
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)


def tell(reaper, pid):
    try:
        reaper.stdin.write(b"%d\n" % pid)
        reaper.stdin.flush()
    except (OSError, ValueError):
        pass  # the reaper is gone: nothing more we can do here


def finish(reaper):
    """tuttirun stopped everything itself: the reaper exits without touching anything."""
    try:
        reaper.stdin.write(DONE + b"\n")
        reaper.stdin.close()
    except (OSError, ValueError):
        pass
    try:
        reaper.wait(timeout=5)
    except subprocess.TimeoutExpired:
        reaper.kill()


def main(argv):
    grace = float(argv[0]) if argv else 3.0
    # Only the pipe decides; a hangup of the launcher's terminal must not stop us early.
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    pids = []
    done = False
    stdin = sys.stdin.fileno()
    pending = b""
    while True:
        try:
            chunk = os.read(stdin, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line == DONE:
                done = True
            elif line.strip().isdigit():
                pids.append(int(line))
    if not done and pids:
        sessions.stop_sessions(pids, grace)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
