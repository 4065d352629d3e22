"""Negotiation across ranks: different submission orders, and mismatches that every rank
reports as PreconditionError instead of hanging."""

import re
import sys

import pytest

import launch

WORKER = launch.worker("workers/negotiation.py")
CONTROLLERS = ["mpi", "gloo"]


def run(scenario, controller, np_=2):
    result = launch.run_ranks(np_, [sys.executable, WORKER, scenario], controller=controller)
    assert result.returncode == 0, launch.describe(result)
    for rank in range(np_):
        assert "rank %d: recovered" % rank in result.stdout, launch.describe(result)
    return result


def errors(result):
    """rank -> (class, message) of the error each rank printed."""
    found = {}
    for match in re.finditer(r"\brank (\d+): (\w+Error): (.*)$", result.stdout, re.M):
        found[int(match.group(1))] = (match.group(2), match.group(3))
    return found


@pytest.mark.parametrize("controller", CONTROLLERS)
@pytest.mark.parametrize("np_", [2, 3])
def test_ranks_may_submit_in_different_orders(controller, np_):
    result = run("order", controller, np_)
    assert result.stdout.count(" ok") == np_, launch.describe(result)


@pytest.mark.parametrize("controller", CONTROLLERS)
@pytest.mark.parametrize("scenario, words", [
    ("shape", ["'mismatch'", "shape", "[2] on rank 0", "[3] on rank 1"]),
    ("dtype", ["'mismatch'", "float32 on rank 0", "float64 on rank 1"]),
    ("op", ["'mismatch'", "sum on rank 0", "max on rank 1"]),
])
def test_mismatch_fails_on_every_rank_with_the_reason(controller, scenario, words):
    result = run(scenario, controller, np_=2)
    seen = errors(result)
    assert sorted(seen) == [0, 1], launch.describe(result)
    for rank, (kind, message) in seen.items():
        assert kind == "PreconditionError", launch.describe(result)
        for word in words:
            assert word in message.lower(), "rank %d: %s lacks %r" % (rank, message, word)
    print(result.stdout)  # the messages are the point of this test: keep them in the log


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_duplicate_name_in_flight_is_refused(controller):
    result = run("duplicate", controller, np_=2)
    seen = errors(result)
    assert list(seen) == [0], launch.describe(result)
    # A ValueError (InvalidArgumentError), as Horovod reports a duplicate name.
    assert seen[0][0] == "InvalidArgumentError" and "twice" in seen[0][1], \
        launch.describe(result)
