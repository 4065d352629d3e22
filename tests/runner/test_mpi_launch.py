"""Real MPI-mode jobs through the system's mpirun (Open MPI here)."""

import re
import signal
import sys
import time

import runner_helpers
from runner_helpers import LiveJob, tuttirun, worker

PRINT_ENV = [sys.executable, worker("print_env.py")]


def test_mpi_ranks_with_prefixed_output_and_settings():
    result = tuttirun(["--mpi", "-np", "3", "--cycle-time-ms", "2", "--fusion-threshold-mb", "1"]
                      + PRINT_ENV + ["x y"], timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in range(3):
        line = re.search(r"^\[%d\]<stdout>: rank=%d .*$" % (rank, rank), result.stdout, re.M)
        assert line, result.stdout
        assert "TUTTI_CONTROLLER=mpi" in line.group(0)
        assert "TUTTI_CYCLE_TIME=2.0" in line.group(0)
        assert "TUTTI_FUSION_THRESHOLD=1048576" in line.group(0)
        assert "args=x%20y" in line.group(0)
        assert "[%d]<stderr>: to stderr from rank %d\n" % (rank, rank) in result.stderr


def test_mpi_verbose_shows_the_mpirun_command():
    result = tuttirun(["--mpi", "-np", "2", "--verbose", "--autotune"] + PRINT_ENV, timeout=60)
    assert result.returncode == 0, result.stderr
    command = [l for l in result.stderr.splitlines() if l.startswith("tuttirun: mpirun ")]
    assert len(command) == 1, result.stderr
    assert "--allow-run-as-root" in command[0] and "-x TUTTI_AUTOTUNE=1" in command[0]
    assert "-x TUTTI_CONTROLLER=mpi" in command[0] and "-x PATH" in command[0]
    assert "-m tutti.runner.rank_output -- " in command[0]


def test_mpi_output_filename(tmp_path):
    code = "import sys; print('hello'); print('oops', file=sys.stderr)"
    result = tuttirun(["--mpi", "-np", "2", "--output-filename", str(tmp_path),
                       sys.executable, "-c", code], timeout=60)
    assert result.returncode == 0, result.stderr
    for rank in range(2):
        assert (tmp_path / ("rank.%d" % rank) / "stdout").read_text() == "hello\n"
        assert (tmp_path / ("rank.%d" % rank) / "stderr").read_text() == "oops\n"


def test_mpi_failing_rank_fails_the_job():
    marker = runner_helpers.new_marker()
    started = time.monotonic()
    try:
        result = tuttirun(["--mpi", "-np", "2", sys.executable, worker("stubborn.py"), marker,
                           "--fail-rank", "1", "--code", "3"], timeout=60)
        assert result.returncode == 3, result.stdout + result.stderr
        assert time.monotonic() - started < 10
        assert "tuttirun: mpirun exited with code 3" in result.stderr
        assert runner_helpers.wait_until_gone(marker, timeout=3) == []
    finally:
        runner_helpers.kill_marked(marker)


def test_sigterm_stops_an_mpi_job():
    marker = runner_helpers.new_marker()
    job = LiveJob(["--mpi", "-np", "2", sys.executable, worker("stubborn.py"), marker])
    try:
        job.wait_for_output("ready", count=2)
        job.proc.send_signal(signal.SIGTERM)
        assert job.wait(20) == 128 + signal.SIGTERM, job.describe()
        assert runner_helpers.wait_until_gone(marker, timeout=3) == []
    finally:
        runner_helpers.kill_marked(marker)
