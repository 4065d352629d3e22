"""SIGKILL of tuttirun (as the OOM killer would do): nothing the job started may outlive it,
neither the ranks and what they started (Gloo mode, fixed or elastic) nor mpirun and its
ranks (--mpi)."""

import os
import re
import select
import signal
import subprocess
import sys
import time

import pytest

import launch
from scenario import scenario

WORKER = launch.worker("workers/sleeper.py")


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for_pids(proc, count, timeout):
    """Reads tuttirun's stdout (raw reads: a buffered reader could sit on a line that select
    no longer reports) until `count` ranks reported their pids."""
    deadline = time.monotonic() + timeout
    pattern = r"pid (\d+) child (\d+) parent (\d+)"
    text = ""
    while len(re.findall(pattern, text)) < count and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            text += chunk.decode(errors="replace")
    found = [tuple(int(g) for g in match) for match in re.findall(pattern, text)]
    return found, text


@scenario("launcher-sigkill")
@pytest.mark.parametrize("mode", ["--gloo", "--mpi", "elastic"])
def test_nothing_outlives_a_killed_tuttirun(mode, tmp_path):
    argv = [sys.executable, "-m", "tutti.runner", "-np", "2"]
    if mode == "--mpi":
        argv += ["--mpi", "--mpi-args", "--oversubscribe --allow-run-as-root"]
    elif mode == "elastic":
        discover = tmp_path / "discover.sh"
        discover.write_text("#!/bin/sh\necho 127.0.0.2:2\n")
        discover.chmod(0o755)
        argv += ["--host-discovery-script", str(discover)]
    else:
        argv.append(mode)
    proc = subprocess.Popen(argv + [sys.executable, WORKER], env=launch._job_environment({}),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    job = []
    try:
        found, text = wait_for_pids(proc, 2, 60)
        assert len(found) == 2, "the ranks did not start:\n" + text
        job = sorted({pid for triple in found for pid in triple} - {proc.pid})
        os.kill(proc.pid, signal.SIGKILL)  # tuttirun alone: no chance to clean up
        proc.wait(timeout=10)
        deadline = time.monotonic() + 20
        while any(alive(pid) for pid in job) and time.monotonic() < deadline:
            time.sleep(0.1)
        survivors = [pid for pid in job if alive(pid)]
        assert not survivors, "still running after tuttirun was killed: %s" % survivors
    finally:
        for pid in job:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if proc.poll() is None:
            proc.kill()
        proc.wait()
