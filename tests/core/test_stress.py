"""Stress (workers/stress.py): every rank submits the same 200 requests of random sizes,
collectives and dtypes, in its own random order and from two threads, asynchronously; all
complete with correct results, on 2 and 3 ranks under MPI and Gloo."""

import sys

import pytest

import launch

WORKER = launch.worker("workers/stress.py")


@pytest.mark.parametrize("np_", [2, 3])
@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_200_requests_in_different_orders(controller, np_):
    result = launch.run_ranks(np_, [sys.executable, WORKER, "200"], controller=controller,
                              timeout=240)
    assert result.returncode == 0, launch.describe(result)
    for rank in range(np_):
        assert "rank %d/%d: 200 cases ok, 0 failed" % (rank, np_) in result.stdout, \
            launch.describe(result)
