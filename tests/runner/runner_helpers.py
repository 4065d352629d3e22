"""Helpers shared by the tuttirun tests: start tuttirun for real, find leftover processes."""

import os
import subprocess
import sys
import threading
import time
import uuid

import launch

HERE = os.path.dirname(os.path.abspath(__file__))
TUTTIRUN = [sys.executable, "-m", "tutti.runner"]


def worker(name):
    return os.path.join(HERE, "workers", name)


def tuttirun(args, env=None, timeout=60):
    """Runs `tuttirun ARGS` to completion; CompletedProcess with text output."""
    return launch.run(TUTTIRUN + list(args), env=env, timeout=timeout)


def job_environment(env=None):
    return launch._job_environment(env)


def new_marker():
    """A unique word to put on worker command lines, to find their processes later."""
    return "tutti-test-marker-" + uuid.uuid4().hex[:12]


def processes_with(marker):
    """PIDs of live (non-zombie) processes whose command line contains `marker`."""
    found = []
    own = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == own:
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                cmdline = handle.read()
            with open("/proc/%s/stat" % entry, "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker.encode() in cmdline and state != b"Z":
            found.append(int(entry))
    return found


def wait_until_gone(marker, timeout=5.0):
    """Waits for every marked process to end; returns those still alive after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        alive = processes_with(marker)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def kill_marked(marker):
    """Last-resort cleanup so that a failing test leaves nothing behind."""
    for pid in processes_with(marker):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


class LiveJob:
    """tuttirun running in the background, its output collected line by line."""

    def __init__(self, args, env=None):
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            TUTTIRUN + list(args), env=job_environment(env), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.stdout = []
        self.stderr = []
        self._readers = [
            threading.Thread(target=self._collect, args=(self.proc.stdout, self.stdout), daemon=True),
            threading.Thread(target=self._collect, args=(self.proc.stderr, self.stderr), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _collect(stream, lines):
        for line in stream:
            lines.append(line)

    def wait_for_output(self, text, count=1, timeout=30.0):
        """Waits until `text` appeared in `count` stdout lines."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sum(text in line for line in list(self.stdout)) >= count:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError("%r did not appear %d times:\n%s" % (text, count, self.describe()))

    def wait(self, timeout):
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
            raise AssertionError("tuttirun did not exit within %s s:\n%s" % (timeout, self.describe()))
        for reader in self._readers:
            reader.join(5)
        return code

    def describe(self):
        return "--- stdout ---\n%s--- stderr ---\n%s" % ("".join(self.stdout), "".join(self.stderr))
