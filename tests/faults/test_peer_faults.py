"""A peer that dies, stops, hangs or disagrees: the others get an error in bounded time,
never a hang (3 ranks; Gloo over TCP, so that errors come from sockets, and MPI)."""

import re
import sys

import pytest

import launch
from scenario import scenario

WORKER = launch.worker("workers/peer_fault.py")
TIMEOUT = "10"  # TUTTI_GLOO_TIMEOUT_SECONDS


def run(mode, controller="gloo", env=None):
    job_env = {"TUTTI_SHM": "off", "TUTTI_GLOO_TIMEOUT_SECONDS": TIMEOUT}
    job_env.update(env or {})
    result = launch.run_ranks(3, [sys.executable, WORKER, mode], controller=controller,
                              env=job_env, timeout=150)
    print(result.stdout)
    errors = {}
    for match in re.finditer(r"rank (\d+): error after ([\d.]+) s: (\w+): (.*)$", result.stdout,
                             re.M):
        errors[int(match.group(1))] = (float(match.group(2)), match.group(3), match.group(4))
    return result, errors


@scenario("killed-rank")
def test_a_killed_rank_is_reported_by_rank_number():
    result, errors = run("kill")
    assert sorted(errors) == [0, 1], launch.describe(result)
    for seconds, kind, message in errors.values():
        assert kind == "AbortedError", message
        assert seconds < 30, message
    # Gloo names the peer by an address; the core adds which rank that is, in every error.
    # A survivor that was waiting on the other survivor may see that one leave first (it
    # exits right after its own error), so the killed rank is named at least once.
    tags = {rank: re.findall(r"\]:\d+ \(rank (\d)", m) for rank, (_, _, m) in errors.items()}
    assert all(tags.values()), errors
    named = {tag for found in tags.values() for tag in found}
    assert "2" in named and named <= {"0", "1", "2"}, errors


@scenario("stopped-rank")
def test_a_stopped_rank_fails_the_others_at_the_timeout():
    result, errors = run("stop")
    assert result.returncode == 3, launch.describe(result)  # and tuttirun ended rank 2
    assert sorted(errors) == [0, 1], launch.describe(result)
    for seconds, kind, message in errors.values():
        assert kind == "AbortedError", message
        assert "timeout" in message.lower(), message
        assert seconds < 60, message


@scenario("hung-rank")
def test_a_hung_rank_is_named_by_the_stall_check_and_the_job_stops():
    result, errors = run("hang", env={"TUTTI_STALL_CHECK_TIME_SECONDS": "1",
                                      "TUTTI_STALL_SHUTDOWN_TIME_SECONDS": "3"})
    assert result.returncode == 3, launch.describe(result)
    assert sorted(errors) == [0, 1], launch.describe(result)
    for seconds, kind, message in errors.values():
        assert kind == "PreconditionError", message
        assert "waited more than 3 s for rank 2 to submit it" in message, message
        assert seconds < 60, message
    assert "stall" in result.stderr.lower(), launch.describe(result)  # the warnings came first


@scenario("mismatched-shapes")
@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_mismatched_shapes_fail_every_rank_naming_the_difference(controller):
    result, errors = run("mismatch", controller)
    assert sorted(errors) == [0, 1, 2], launch.describe(result)
    for seconds, kind, message in errors.values():
        assert "after.0" in message and "shape" in message, message
