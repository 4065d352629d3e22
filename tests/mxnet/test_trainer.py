"""DistributedTrainer and broadcast_parameters on 2 ranks, under MPI and Gloo."""

import sys

import pytest
from launch import describe, run_ranks, worker


@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_two_rank_training_matches_one_rank_on_the_whole_batch(controller):
    result = run_ranks(2, [sys.executable, worker("workers/trainer_worker.py")], controller)
    assert result.returncode == 0, describe(result)
    for rank in range(2):
        assert "rank %d: trainer checks passed" % rank in result.stdout, describe(result)
