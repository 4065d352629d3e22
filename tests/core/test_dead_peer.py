"""A rank that leaves mid-job gives the others an error, never a hang
(workers/dead_peer.py, 3 ranks; the last rank leaves after three allreduces)."""

import os
import re
import sys
import time

import pytest

import launch

WORKER = launch.worker("workers/dead_peer.py")
# Bound on how long the survivors may take to notice, well below the job timeout.
NOTICE_SECONDS = 30


def tutti_segments():
    return {name for name in os.listdir("/dev/shm") if name.startswith("tutti-")}


@pytest.fixture(autouse=True)
def no_segment_left_behind():
    """Shared-memory segments (TUTTI_SHM=auto puts the 3 ranks in one) must not outlive a
    job whose rank exited or crashed."""
    before = tutti_segments()
    yield
    # A job running beside this one (another test) holds its segment's name for the
    # moment between creating and unlinking it: only a name that stays counts.
    deadline = time.monotonic() + 2.0
    while (tutti_segments() - before) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = tutti_segments() - before
    assert not left, "left in /dev/shm: %s" % sorted(left)


def survivors_errors(result):
    found = {}
    for match in re.finditer(r"rank (\d+): error after ([\d.]+) s: (\w+): (.*)$",
                             result.stdout, re.M):
        found[int(match.group(1))] = (float(match.group(2)), match.group(3), match.group(4))
    return found


def run(controller, mode):
    result = launch.run_ranks(3, [sys.executable, WORKER, mode], controller=controller,
                              env={"TUTTI_GLOO_TIMEOUT_SECONDS": "20"}, timeout=120)
    print(result.stdout)
    return result


@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_a_peer_exiting_without_shutdown_aborts_the_others(controller):
    result = run(controller, "exit")
    assert result.returncode == 0, launch.describe(result)
    errors = survivors_errors(result)
    assert sorted(errors) == [0, 1], launch.describe(result)
    for rank, (seconds, kind, message) in errors.items():
        assert seconds < NOTICE_SECONDS, launch.describe(result)
        assert kind == "AbortedError", launch.describe(result)
        assert message == ("tutti was shut down by rank 2 (it called shutdown() or exited) "
                           "before the request ran"), message
        assert "rank %d: shut down" % rank in result.stdout, launch.describe(result)


def test_a_crashed_peer_fails_the_others_under_gloo():
    result = run("gloo", "crash")
    assert result.returncode == 0, launch.describe(result)
    errors = survivors_errors(result)
    assert sorted(errors) == [0, 1], launch.describe(result)
    for rank, (seconds, kind, message) in errors.items():
        assert seconds < NOTICE_SECONDS, launch.describe(result)
        assert kind == "AbortedError", launch.describe(result)
        assert message.startswith("tutti's gloo transport failed"), message
        assert "a peer process may have exited" in message, message
        assert "rank %d: shut down" % rank in result.stdout, launch.describe(result)


def test_a_crashed_peer_fails_every_survivor_even_if_none_shuts_down(tmp_path):
    # The survivors keep their connections open after their error (no shutdown until all
    # have had one) and the transport timeout is beyond the test's deadline, so a survivor
    # that only hears of the crash from its own timeout makes the job miss the deadline.
    # Shared memory is off: its liveness check would see the dead rank directly.
    # 4 ranks: rank 1 neither sends to nor receives from rank 3 in the negotiation ring.
    result = launch.run_ranks(
        4, [sys.executable, WORKER, "hold", str(tmp_path)], controller="gloo",
        env={"TUTTI_GLOO_TIMEOUT_SECONDS": "600", "TUTTI_SHM": "off"}, timeout=120)
    print(result.stdout)
    assert result.returncode == 0, launch.describe(result)
    errors = survivors_errors(result)
    assert sorted(errors) == [0, 1, 2], launch.describe(result)
    for rank, (seconds, kind, message) in errors.items():
        assert kind == "AbortedError", launch.describe(result)
        assert message.startswith("tutti's gloo transport failed"), message


def test_a_crashed_peer_ends_the_whole_job_under_mpirun():
    # mpirun itself aborts a job whose rank exits without MPI_Finalize; the point is that
    # the job ends promptly with a failure instead of hanging.
    result = run("mpi", "crash")
    assert result.returncode != 0, launch.describe(result)
    assert "rank 0: 3 steps done" in result.stdout, launch.describe(result)
    assert "finalize" in (result.stdout + result.stderr).lower(), launch.describe(result)
