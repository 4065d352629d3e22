"""All three plugins loaded in one process reach the same core: one background thread,
one communicator, results correct through each framework."""

import sys

import pytest

import launch

WORKER = launch.worker("workers/all_frameworks.py")


@pytest.mark.parametrize("order", [["torch", "tensorflow", "mxnet"], ["mxnet", "tensorflow", "torch"]])
def test_single_process_shares_one_core(order):
    result = launch.run([sys.executable, WORKER] + order, timeout=180)
    assert result.returncode == 0, launch.describe(result)
    assert "rank 0/1: one core" in result.stdout


@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_two_ranks_share_one_core_per_process(controller):
    result = launch.run_ranks(2, [sys.executable, WORKER], controller=controller, timeout=240)
    assert result.returncode == 0, launch.describe(result)
    for rank in range(2):
        assert "rank %d/2: one core" % rank in result.stdout, launch.describe(result)
