"""tutti.numpy allreduce of every dtype x reduction x 1-3 dims on 2 and 3 ranks, under MPI
and Gloo, against numpy references."""

import sys

import pytest

import launch

WORKER = launch.worker("workers/allreduce_matrix.py")


@pytest.mark.parametrize("np_", [2, 3])
@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_every_dtype_and_reduction(controller, np_):
    result = launch.run_ranks(np_, [sys.executable, WORKER], controller=controller, timeout=240)
    assert result.returncode == 0, launch.describe(result)
    for rank in range(np_):
        assert "rank %d/%d: " % (rank, np_) in result.stdout, launch.describe(result)
    assert "FAIL" not in result.stdout, launch.describe(result)


def test_every_dtype_and_reduction_alone():
    result = launch.run([sys.executable, WORKER], env={"TUTTI_CONTROLLER": ""})
    assert result.returncode == 0, launch.describe(result)
    assert "rank 0/1: " in result.stdout, launch.describe(result)


@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_torch_gloo_symbols_loaded_globally_do_not_interpose(controller):
    # torch exports a newer, incompatible Gloo; TORCH_USE_RTLD_GLOBAL=1 makes those symbols
    # global before the core and the system's Gloo are loaded.
    result = launch.run_ranks(2, [sys.executable, WORKER, "--torch-first"],
                              controller=controller, env={"TORCH_USE_RTLD_GLOBAL": "1"},
                              timeout=240)
    assert result.returncode == 0, launch.describe(result)
    assert "FAIL" not in result.stdout, launch.describe(result)
