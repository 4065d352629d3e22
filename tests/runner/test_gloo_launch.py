"""Real Gloo-mode jobs: environment, output, failure handling, signals, cleanup."""

import os
import re
import signal
import sys
import time

import pytest

import runner_helpers
from runner_helpers import LiveJob, tuttirun, worker

PRINT_ENV = [sys.executable, worker("print_env.py")]
STUBBORN = [sys.executable, worker("stubborn.py")]


def rank_lines(stdout):
    """{rank: the fields its print_env line reported}."""
    found = {}
    for line in stdout.splitlines():
        match = re.match(r"\[(\d+)\]<stdout>: (rank=.*)$", line)
        if match:
            found[int(match.group(1))] = dict(f.split("=", 1) for f in match.group(2).split())
    return found


@pytest.mark.parametrize("np", [2, 3])
def test_ranks_get_their_place_in_the_environment(np):
    result = tuttirun(["-np", str(np), "--cycle-time-ms", "3"] + PRINT_ENV + ["a", "b c"])
    assert result.returncode == 0, result.stderr
    lines = rank_lines(result.stdout)
    assert sorted(lines) == list(range(np)), result.stdout
    for rank, fields in lines.items():
        assert fields["rank"] == str(rank) and fields["size"] == str(np)
        assert fields["local_rank"] == str(rank) and fields["local_size"] == str(np)
        assert fields["cross_rank"] == "0" and fields["cross_size"] == "1"
        assert fields["HOROVOD_RANK"] == str(rank) and fields["HOROVOD_SIZE"] == str(np)
        assert fields["TUTTI_CONTROLLER"] == "gloo"
        assert fields["TUTTI_GLOO_RENDEZVOUS_ADDR"] == "127.0.0.1"
        assert fields["TUTTI_GLOO_IFACE"] == "lo"
        assert fields["TUTTI_CYCLE_TIME"] == "3.0"
        assert fields["secret_set"] == "True"
        assert fields["args"] == "a%2Cb%20c"  # quoted "a,b c": both arguments arrived intact


def test_two_local_host_entries_make_two_cross_ranks():
    result = tuttirun(["-np", "3", "-H", "localhost:1,127.0.0.1:2"] + PRINT_ENV)
    assert result.returncode == 0, result.stderr
    lines = rank_lines(result.stdout)
    places = {r: (f["local_rank"], f["local_size"], f["cross_rank"], f["cross_size"])
              for r, f in lines.items()}
    assert places == {0: ("0", "1", "0", "2"), 1: ("0", "2", "1", "2"), 2: ("1", "2", "1", "2")}


def test_every_line_is_prefixed_with_its_rank_and_stream():
    result = tuttirun(["-np", "2"] + PRINT_ENV)
    assert result.returncode == 0
    for rank in range(2):
        assert "[%d]<stderr>: to stderr from rank %d\n" % (rank, rank) in result.stderr
        assert re.search(r"^\[%d\]<stdout>: rank=%d " % (rank, rank), result.stdout, re.M)
    assert all(line.startswith("[") for line in result.stdout.splitlines())


def test_output_filename_keeps_a_log_per_rank(tmp_path):
    log_dir = tmp_path / "logs"
    code = "import sys; print('out', 1); print('err', 2, file=sys.stderr); sys.stdout.write('tail')"
    result = tuttirun(["-np", "2", "--output-filename", str(log_dir), sys.executable, "-c", code])
    assert result.returncode == 0, result.stderr
    for rank in range(2):
        assert (log_dir / ("rank.%d" % rank) / "stdout").read_text() == "out 1\ntail"
        assert (log_dir / ("rank.%d" % rank) / "stderr").read_text() == "err 2\n"
        assert "[%d]<stdout>: tail\n" % rank in result.stdout


def test_verbose_shows_commands_and_masks_the_secret():
    code = "import os; print('SECRET=' + os.environ['TUTTI_GLOO_SECRET'])"
    result = tuttirun(["-np", "2", "--verbose", "--autotune", sys.executable, "-c", code])
    assert result.returncode == 0, result.stderr
    secret = re.search(r"SECRET=(\w+)", result.stdout).group(1)
    assert secret not in result.stderr
    assert "rendezvous store listening on 127.0.0.1:" in result.stderr
    for rank in range(2):
        assert re.search(r"tuttirun: rank %d on localhost: env .*TUTTI_AUTOTUNE=1 .*"
                         r"TUTTI_RANK=%d .*TUTTI_GLOO_SECRET='\*+' .*-c " % (rank, rank),
                         result.stderr), result.stderr


def test_secret_is_not_on_any_command_line():
    marker = runner_helpers.new_marker()
    job = LiveJob(["-np", "2"] + STUBBORN + [marker])
    try:
        job.wait_for_output("ready", count=2)
        secret = None
        for pid in runner_helpers.processes_with(marker):
            with open("/proc/%d/environ" % pid, "rb") as handle:
                for item in handle.read().split(b"\0"):
                    if item.startswith(b"TUTTI_GLOO_SECRET="):
                        secret = item.split(b"=", 1)[1]
        assert secret
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open("/proc/%s/cmdline" % entry, "rb") as handle:
                        assert secret not in handle.read()
                except OSError:
                    pass
    finally:
        job.proc.send_signal(signal.SIGTERM)
        job.wait(15)
        runner_helpers.kill_marked(marker)


def test_failing_rank_stops_the_job_with_its_exit_code():
    marker = runner_helpers.new_marker()
    started = time.monotonic()
    try:
        result = tuttirun(["-np", "3"] + STUBBORN + [marker, "--fail-rank", "1", "--code", "3"],
                          timeout=30)
        elapsed = time.monotonic() - started
        assert result.returncode == 3, result.stderr
        assert elapsed < 5, "took %.1f s" % elapsed
        assert "tuttirun: rank 1 exited with code 3; stopping the other ranks" in result.stderr
        assert runner_helpers.wait_until_gone(marker, timeout=1) == []
    finally:
        runner_helpers.kill_marked(marker)


def test_rank_killed_by_a_signal():
    code = "import os, signal, time; r = os.environ['TUTTI_RANK']\n" \
           "if r == '0': os.kill(os.getpid(), signal.SIGKILL)\ntime.sleep(60)"
    result = tuttirun(["-np", "2", sys.executable, "-c", code], timeout=30)
    assert result.returncode == 128 + signal.SIGKILL
    assert "tuttirun: rank 0 was killed by SIGKILL; stopping the other ranks" in result.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_tuttirun_stops_every_rank(signum):
    marker = runner_helpers.new_marker()
    job = LiveJob(["-np", "3"] + STUBBORN + [marker])
    try:
        job.wait_for_output("ready", count=3)
        workers = set(runner_helpers.processes_with(marker)) - {job.proc.pid}
        assert len(workers) == 6  # 3 ranks + 3 grandchildren
        sent = time.monotonic()
        job.proc.send_signal(signum)
        code = job.wait(15)
        assert code == 128 + signum, job.describe()
        assert time.monotonic() - sent < 5
        assert "received %s; stopping the job" % signal.Signals(signum).name in "".join(job.stderr)
        assert runner_helpers.wait_until_gone(marker, timeout=1) == []
    finally:
        runner_helpers.kill_marked(marker)


def test_ranks_that_ignore_sigterm_are_killed_after_the_grace_period():
    marker = runner_helpers.new_marker()
    job = LiveJob(["-np", "2", "--stop-grace-seconds", "1"] + STUBBORN
                  + [marker, "--ignore-term"])
    try:
        job.wait_for_output("ready", count=2)
        sent = time.monotonic()
        job.proc.send_signal(signal.SIGTERM)
        assert job.wait(15) == 128 + signal.SIGTERM
        assert 1 <= time.monotonic() - sent < 5
        assert runner_helpers.wait_until_gone(marker, timeout=1) == []
    finally:
        runner_helpers.kill_marked(marker)


def test_grandchildren_of_successful_ranks_are_cleaned_up():
    marker = runner_helpers.new_marker()
    code = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
            "'import time; time.sleep(60)', sys.argv[1]]); print('spawned')")
    try:
        result = tuttirun(["-np", "2", "--stop-grace-seconds", "1", sys.executable, "-c", code,
                           marker], timeout=30)
        assert result.returncode == 0, result.stderr
        assert runner_helpers.wait_until_gone(marker, timeout=1) == []
    finally:
        runner_helpers.kill_marked(marker)
