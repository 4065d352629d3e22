"""The processes a launcher starts: each in a session of its own, watched, stopped as a group.

One owner for what a fixed job (supervisor.py) and an elastic job (elastic/driver.py) both
do with their processes: start one with its output attached to the job's sink and its
stdin data written, report its exit on a queue, tell the reaper about it (so that it does
not outlive a launcher that is killed), and stop some or all of them: SIGTERM, then
SIGKILL after a grace period, to every process of their sessions (sessions.py).
"""

import queue
import subprocess
import threading

from . import reaper, sessions


class ProcessGroup:
    """Processes keyed by a number (a rank, or an elastic worker id). `exits` receives
    (key, returncode) as each one ends."""

    def __init__(self, sink, grace_seconds):
        self._sink = sink
        self._grace = grace_seconds
        self._procs = {}
        self._reaper = None
        self.exits = queue.Queue()

    def start_reaper(self):
        """Starts the reaper before the first process; OSError when it cannot start."""
        self._reaper = reaper.start(self._grace)

    def start(self, key, spec):
        """Starts `spec` (a supervisor.ProcessSpec); OSError when it cannot start."""
        proc = subprocess.Popen(
            spec.argv, env=spec.env, start_new_session=True,
            stdin=subprocess.PIPE if spec.stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._procs[key] = proc
        if self._reaper is not None:
            reaper.tell(self._reaper, proc.pid)
        self._sink.attach(key, "stdout", proc.stdout)
        self._sink.attach(key, "stderr", proc.stderr)
        if spec.stdin_data is not None:
            try:
                proc.stdin.write(spec.stdin_data)
                proc.stdin.flush()
            except OSError:
                pass  # it died already; its exit status tells the story
        threading.Thread(target=lambda: self.exits.put((key, proc.wait())), daemon=True,
                         name="tutti-wait-%s" % key).start()

    def stop(self, keys, on_stuck=None):
        """Stops the sessions of `keys` (also those whose leader already exited): closes
        their stdin, SIGTERM, SIGKILL after the grace period. `on_stuck(key, pid)` is
        called for a process still there 5 s after that."""
        procs = {k: self._procs[k] for k in keys if k in self._procs}
        for proc in procs.values():
            if proc.stdin is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
        sessions.stop_sessions([proc.pid for proc in procs.values()], self._grace)
        for key, proc in procs.items():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                if on_stuck is not None:
                    on_stuck(key, proc.pid)

    def stop_all(self, on_stuck=None):
        """Stops every process, dismisses the reaper and waits briefly for the output."""
        self.stop(list(self._procs), on_stuck)
        if self._reaper is not None:
            reaper.finish(self._reaper)
            self._reaper = None
        self._sink.join(timeout=2)
