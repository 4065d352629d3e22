"""Horovod 0.28.1 compatibility of tutti.torch and the shared API, on real jobs: 2 and 3
ranks under MPI (mpirun) and Gloo (tuttirun). Each worker is a Horovod-style script that
asserts Horovod's behaviour and prints one summary line per rank."""

import sys

import pytest

import launch

CONTROLLERS = ["mpi", "gloo"]
SIZES = [2, 3]


def _assert_ok(result, size):
    assert result.returncode == 0, launch.describe(result)
    for rank in range(size):
        assert "rank %d/%d:" % (rank, size) in result.stdout, launch.describe(result)
    assert "FAIL" not in result.stdout, launch.describe(result)


def _run(script, controller, size, env=None, timeout=240):
    return launch.run_ranks(size, [sys.executable, launch.worker("workers/" + script)],
                            controller, env=env, timeout=timeout)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("controller", CONTROLLERS)
def test_checkpoint_resume_with_every_optimizer(controller, size):
    _assert_ok(_run("checkpoint_resume.py", controller, size), size)


@pytest.mark.parametrize("cache", ["on", "off"])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("controller", CONTROLLERS)
def test_integer_averages_with_join_as_horovod(controller, size, cache):
    env = {"TUTTI_CACHE_CAPACITY": "1024" if cache == "on" else "0"}
    _assert_ok(_run("integer_averages.py", controller, size, env=env), size)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("controller", CONTROLLERS)
def test_horovod_api_and_behaviour(controller, size):
    _assert_ok(_run("horovod_api.py", controller, size), size)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("controller", CONTROLLERS)
def test_a_deadlock_ends_in_an_error_naming_tensors_and_ranks(controller, size):
    env = {"TUTTI_STALL_CHECK_TIME_SECONDS": "2"}
    _assert_ok(_run("deadlock.py", controller, size, env=env, timeout=120), size)
