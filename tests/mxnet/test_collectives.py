"""Every collective of tutti.mxnet x every dtype x rank 0-3 (x every op for the
reductions), process sets, objects, compression and join with uneven work, on 2 and 3
ranks under MPI and Gloo."""

import sys

import pytest
from launch import describe, run_ranks, worker


@pytest.mark.parametrize("np_", [2, 3])
@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_every_collective_every_dtype(controller, np_):
    result = run_ranks(np_, [sys.executable, worker("workers/collectives_worker.py")],
                       controller, timeout=300)
    assert result.returncode == 0, describe(result)
    for rank in range(np_):
        assert "rank %d: collective cases passed" % rank in result.stdout, describe(result)


@pytest.mark.parametrize("np_", [2, 3])
@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_collective_errors_raise_mxnet_error_and_process_continues(controller, np_):
    result = run_ranks(np_, [sys.executable, worker("workers/collective_errors_worker.py")],
                       controller)
    assert result.returncode == 0, describe(result)
    for rank in range(np_):
        assert "rank %d: collective error checks passed" % rank in result.stdout, (
            describe(result))
        assert "rank %d: allgather mismatch -> MXNetError: " % rank in result.stdout, (
            describe(result))
    assert "ranks disagree" in result.stdout, describe(result)
