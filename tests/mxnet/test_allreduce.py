"""allreduce / allreduce_ of every dtype x op x rank 1-3 on 2 ranks, under MPI and Gloo."""

import sys

import pytest
from launch import describe, run_ranks, worker


@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_allreduce_every_dtype_op_and_rank(controller):
    result = run_ranks(2, [sys.executable, worker("workers/allreduce_worker.py")], controller)
    assert result.returncode == 0, describe(result)
    for rank in range(2):
        assert "rank %d: " % rank in result.stdout and "allreduce cases passed" in result.stdout, (
            describe(result))
