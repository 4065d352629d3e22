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
import sys
import threading

from . import sessions
from .processes import ProcessGroup

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
        self._name = name
        self._log = log
        self._group = ProcessGroup(sink, grace_seconds)
        self._signal = None

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
            self._group.start(spec.rank, spec)
        except OSError as exc:
            raise StartError("cannot start %s (%s): %s"
                             % (self._name(spec.rank), spec.argv[0], exc.strerror or exc))

    def _run(self):
        failed_rank = None
        exit_code = 0
        try:
            self._group.start_reaper()
        except OSError as exc:
            self._log("cannot start the reaper (%s); stopping the job" % (exc.strerror or exc))
            return JobResult(127, None, None)
        running = set()
        try:
            for spec in self._specs:
                if self._signal is not None:
                    break
                self._start(spec)
                running.add(spec.rank)
        except StartError as exc:
            self._log("%s; stopping the job" % exc)
            self._stop_all()
            return JobResult(127, None, None)
        while running and self._signal is None:
            try:
                rank, returncode = self._group.exits.get(timeout=0.1)
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
        self._group.stop_all(on_stuck=lambda rank, pid: self._log(
            "%s (pid %d) did not exit after SIGKILL" % (self._name(rank), pid)))
