"""The rendezvous store under a crowd of connections from peers without the secret.

A real tuttirun job (2 ranks, Gloo) whose store is flooded with 3,000 connections (idle,
half-sent, wrong secret; reopened as the store closes them) before the ranks call init().
tuttirun runs with a soft limit of 512 file descriptors, so the flood also exhausts them,
as it would on a host with the common default of 1024. Loopback only.
"""

import os
import re
import resource
import select
import signal
import subprocess
import sys
import time

import launch
from flood import Flood
from scenario import scenario

WORKER = launch.worker("workers/allreduce_after_go.py")
FLOOD_SIZE = 3000


def _limit_descriptors():
    resource.setrlimit(resource.RLIMIT_NOFILE, (512, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def _read_until(proc, pattern, timeout):
    """Reads proc's stderr (raw reads, so that select sees every byte not yet read) until
    `pattern` matches; returns (match, text read)."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.5)
        if ready:
            chunk = os.read(proc.stderr.fileno(), 65536)
            if not chunk:
                break
            text += chunk.decode(errors="replace")
            match = re.search(pattern, text)
            if match:
                return match, text
    return None, text


@scenario("store-flood")
def test_job_forms_while_strangers_hold_thousands_of_store_connections(tmp_path):
    go = tmp_path / "go"
    argv = launch.launcher_command(2, "gloo") + ["--verbose", sys.executable, WORKER, str(go)]
    proc = subprocess.Popen(argv, env=launch._job_environment({"TUTTI_GLOO_TIMEOUT_SECONDS":
                                                                 "60"}),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=_limit_descriptors)
    try:
        match, lines = _read_until(proc, r"rendezvous store listening on 127\.0\.0\.1:(\d+)", 60)
        assert match, "no store address in tuttirun's output:\n" + lines
        with Flood(int(match.group(1)), FLOOD_SIZE) as flood:
            deadline = time.monotonic() + 30
            while flood.opened < FLOOD_SIZE and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(1.0)  # let the store work through the crowd before the ranks arrive
            go.write_text("go")
            stdout, stderr = proc.communicate(timeout=150)
            print("flood: %d opened, %d reopened after the store closed them"
                  % (flood.opened, flood.reopened))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        raise AssertionError("the job did not finish within 150 s\n" + stdout + stderr)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    output = stdout + lines + stderr
    assert proc.returncode == 0, output
    for rank in range(2):
        assert "rank %d: job formed, allreduce ok" % rank in stdout, output
    assert flood.opened >= FLOOD_SIZE
