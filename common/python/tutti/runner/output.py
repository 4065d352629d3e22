"""Rank-prefixed output: `[1]<stdout>: text`, plus optional per-rank log files."""

import os
import threading
import time

from .errors import UsageError

STREAMS = ("stdout", "stderr")


def prepare_log_dir(directory):
    """Creates --output-filename's directory up front, so a bad path fails before launch."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise UsageError("--output-filename %s: %s" % (directory, exc.strerror or exc)) from None
    if not os.access(directory, os.W_OK):
        raise UsageError("--output-filename %s: directory is not writable" % directory)


class OutputSink:
    """Writes the lines of every rank to `targets` (stream name -> text stream).

    With `log_dir`, each rank's raw output also goes to log_dir/rank.<r>/<stream>. With
    `prefix=False` lines pass through unchanged (mpirun's output is prefixed already).
    With `timestamps`, each prefix starts with the local time the line arrived
    (`Thu Dec  3 17:05:09 2026 [1]<stdout>: text`).
    """

    def __init__(self, targets, log_dir=None, prefix=True, timestamps=False):
        self._targets = targets
        self._log_dir = log_dir
        self._prefix = prefix
        self._timestamps = timestamps
        self._lock = threading.Lock()
        self._threads = []

    def _open_log(self, rank, stream):
        if not self._log_dir:
            return None
        directory = os.path.join(self._log_dir, "rank.%d" % rank)
        os.makedirs(directory, exist_ok=True)
        return open(os.path.join(directory, stream), "wb")

    def attach(self, rank, stream, pipe):
        """Starts forwarding binary `pipe` (a rank's `stream`) until it reaches EOF."""
        thread = threading.Thread(target=self._pump, args=(rank, stream, pipe),
                                  name="tutti-output-%d-%s" % (rank, stream), daemon=True)
        thread.start()
        self._threads.append(thread)

    def _pump(self, rank, stream, pipe):
        prefix = "[%d]<%s>: " % (rank, stream) if self._prefix else ""
        target = self._targets[stream]
        log = self._open_log(rank, stream)
        try:
            for raw in iter(pipe.readline, b""):
                if log is not None:
                    log.write(raw)
                    log.flush()
                text = raw.decode("utf-8", "replace")
                if not text.endswith("\n"):
                    text += "\n"
                stamp = time.asctime() + " " if self._timestamps and self._prefix else ""
                with self._lock:
                    try:
                        target.write(stamp + prefix + text)
                        target.flush()
                    except (OSError, ValueError):
                        pass  # our own stdout went away; keep draining the pipe
        except (OSError, ValueError):
            pass
        finally:
            pipe.close()
            if log is not None:
                log.close()

    def join(self, timeout):
        """Waits up to `timeout` seconds in all for the pipes to drain."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
