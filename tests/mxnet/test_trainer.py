"""DistributedTrainer (per gradient, grouped, predivided, fp16, on a process set, two at
once), DistributedOptimizer with the Module API and broadcast_parameters, on 2 and 3 ranks
under MPI and Gloo: distributed training matches local training on the whole batch."""

import sys

import pytest
from launch import describe, run_ranks, worker


@pytest.mark.parametrize("np_", [2, 3])
@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_distributed_training_matches_local_training_on_the_whole_batch(controller, np_):
    result = run_ranks(np_, [sys.executable, worker("workers/trainer_worker.py")], controller,
                       timeout=240)
    assert result.returncode == 0, describe(result)
    for rank in range(np_):
        assert "rank %d: trainer checks passed" % rank in result.stdout, describe(result)
