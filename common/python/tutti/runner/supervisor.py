"""Starts the processes of a job, forwards their output and stops them all on failure.

The first process that exits non-zero (or dies from a signal) fails the job: the others
get SIGTERM, then SIGKILL after a grace period, sent to every process of their session
(see sessions.py), so that no grandchild survives.
SIGINT, SIGTERM and SIGHUP sent to the launcher stop the job the same way. A launcher that
dies without stopping the job (SIGKILL, the OOM killer) leaves it to the reaper (reaper.py),
which stops every session then.
"""

import collections
import queue
import signal
import subprocess
import sys
import threading

from . import reaper, sessions

# One process to start: `stdin_data`, when not None, is written to its stdin, which then
# stays open for the life of the job (remote_guard stops its rank when stdin closes).
ProcessSpec = collections.namedtuple("ProcessSpec", ["rank", "argv", "env", "stdin_data"])

# exit_code: what the launcher should exit with; failed_rank: the rank that failed the
# job (None if none did); signal_name: the signal that stopped the launcher, if any.
JobResult = collections.namedtuple("JobResult", ["exit_code", "failed_rank", "signal_name"])

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StartError(RuntimeError):
    """A process could not be started at all."""


def _log(message):
    sys.stderr.write("tuttirun: %s\n" % message)
    sys.stderr.flush()


def _name_rank(rank):
    return "rank %d" % rank


class Supervisor:
    """Runs `specs` to completion. `name` names a process in messages ("rank 1")."""

    def __init__(self, specs, sink, grace_seconds, name=_name_rank, log=_log):
        self._specs = specs
        self._sink = sink
        self._grace = grace_seconds
        self._name = name
        self._log = log
        self._procs = {}
        self._exits = queue.Queue()
        self._signal = None
        self._reaper = None

    def run(self):
        previous = self._install_signal_handlers()
        try:
            return self._run()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _install_signal_handlers(self):
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}
        for signum in _STOP_SIGNALS:
            previous[signum] = signal.signal(signum, self._on_signal)
        return previous

    def _on_signal(self, signum, frame):
        if self._signal is None:
            self._signal = signum

    def _start(self, spec):
        try:
            proc = subprocess.Popen(
                spec.argv, env=spec.env, start_new_session=True,
                stdin=subprocess.PIPE if spec.stdin_data is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )
        except OSError as exc:
            raise StartError("cannot start %s (%s): %s"
                             % (self._name(spec.rank), spec.argv[0], exc.strerror or exc))
        self._procs[spec.rank] = proc
        reaper.tell(self._reaper, proc.pid)
        self._sink.attach(spec.rank, "stdout", proc.stdout)
        self._sink.attach(spec.rank, "stderr", proc.stderr)
        if spec.stdin_data is not None:
            try:
                proc.stdin.write(spec.stdin_data)
                proc.stdin.flush()
            except OSError:
                pass  # it died already; its exit status tells the story
        threading.Thread(target=self._wait_for, args=(spec.rank, proc), daemon=True,
                         name="tutti-wait-%d" % spec.rank).start()

    def _wait_for(self, rank, proc):
        self._exits.put((rank, proc.wait()))

    def _run(self):
        failed_rank = None
        exit_code = 0
        try:
            self._reaper = reaper.start(self._grace)
        except OSError as exc:
            self._log("cannot start the reaper (%s); stopping the job" % (exc.strerror or exc))
            return JobResult(127, None, None)
        try:
            for spec in self._specs:
                if self._signal is not None:
                    break
                self._start(spec)
        except StartError as exc:
            self._log("%s; stopping the job" % exc)
            self._stop_all()
            return JobResult(127, None, None)
        running = set(self._procs)
        while running and self._signal is None:
            try:
                rank, returncode = self._exits.get(timeout=0.1)
            except queue.Empty:
                continue
            running.discard(rank)
            if returncode != 0:
                exit_code, words = sessions.describe_exit(returncode)
                failed_rank = rank
                self._log("%s %s; stopping the other ranks" % (self._name(rank), words)
                          if running else "%s %s" % (self._name(rank), words))
                break
        signal_name = None
        if self._signal is not None and failed_rank is None:
            signal_name = signal.Signals(self._signal).name
            exit_code = 128 + self._signal
            self._log("received %s; stopping the job" % signal_name)
        self._stop_all()
        return JobResult(exit_code, failed_rank, signal_name)

    def _stop_all(self):
        """Stops every session (also those whose leader already exited)."""
        for proc in self._procs.values():
            if proc.stdin is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
        sessions.stop_sessions([proc.pid for proc in self._procs.values()], self._grace)
        for rank, proc in self._procs.items():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._log("%s (pid %d) did not exit after SIGKILL" % (self._name(rank), proc.pid))
        reaper.finish(self._reaper)
        self._sink.join(timeout=2)
