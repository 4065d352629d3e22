"""remote_guard: secrets from stdin, exit codes, and stopping the rank when stdin closes."""

import json
import signal
import subprocess
import sys
import time

import runner_helpers

GUARD = [sys.executable, "-m", "tutti.runner.remote_guard"]


def start(command, secrets=None):
    proc = subprocess.Popen(GUARD + command, env=runner_helpers.job_environment(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    if secrets is not None:
        proc.stdin.write(json.dumps(secrets) + "\n")
        proc.stdin.flush()
    return proc


def test_secrets_reach_the_command_and_its_exit_code_comes_back():
    code = "import os, sys; print(os.environ['TUTTI_GLOO_SECRET']); sys.exit(5)"
    proc = start([sys.executable, "-c", code], {"TUTTI_GLOO_SECRET": "from-stdin"})
    # stdin stays open (closing it would stop the rank); the output fits the pipe's buffer.
    assert proc.wait(timeout=30) == 5
    assert proc.stdout.read() == "from-stdin\n"
    proc.stdin.close()


def test_bad_first_line_is_refused():
    proc = subprocess.Popen(GUARD + ["true"], env=runner_helpers.job_environment(),
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate("not json\n", timeout=30)
    assert proc.returncode == 2 and "not a JSON object" in err


def _stop_and_check(how):
    marker = runner_helpers.new_marker()
    proc = start([sys.executable, runner_helpers.worker("stubborn.py"), marker], {})
    try:
        assert proc.stdout.readline().startswith("ready")
        stopped = time.monotonic()
        how(proc)
        assert proc.wait(timeout=10) == 128 + signal.SIGTERM
        assert time.monotonic() - stopped < 5
        assert runner_helpers.wait_until_gone(marker, timeout=1) == []
    finally:
        runner_helpers.kill_marked(marker)


def test_closing_stdin_stops_the_whole_rank():
    _stop_and_check(lambda proc: proc.stdin.close())


def test_sighup_stops_the_whole_rank():
    _stop_and_check(lambda proc: proc.send_signal(signal.SIGHUP))
