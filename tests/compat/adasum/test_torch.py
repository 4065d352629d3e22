"""tutti.torch with op=hvd.Adasum on 2 and 4 ranks (refused on 3), MPI and Gloo: the
collectives against the float64 reference and DistributedOptimizer(op=hvd.Adasum) against a
simulation of Horovod's delta optimizer (SGD with momentum, Adam, two backward passes per
step), a short training run, and Horovod's refusals."""

import sys

import pytest

import launch

WORKER = launch.worker("workers/torch_adasum.py")


@pytest.mark.parametrize("np_", [2, 3, 4])
@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_torch_adasum(controller, np_):
    result = launch.run_ranks(np_, [sys.executable, WORKER], controller=controller,
                              timeout=300)
    assert result.returncode == 0, launch.describe(result)
    for rank in range(np_):
        assert "rank %d/%d: ALL OK" % (rank, np_) in result.stdout, launch.describe(result)


def test_torch_adasum_alone():
    result = launch.run([sys.executable, WORKER], env={"TUTTI_CONTROLLER": ""}, timeout=120)
    assert result.returncode == 0, launch.describe(result)
    assert "rank 0/1: ALL OK" in result.stdout, launch.describe(result)
