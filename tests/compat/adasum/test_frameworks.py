"""tutti.tensorflow and tutti.mxnet with op=hvd.Adasum on 2 ranks (and refused on 3) under
MPI and Gloo, against the float64 reference."""

import sys

import pytest

import launch


def run(worker, controller, np_):
    result = launch.run_ranks(np_, [sys.executable, launch.worker(worker)],
                              controller=controller, timeout=300)
    assert result.returncode == 0, launch.describe(result)
    for rank in range(np_):
        assert "rank %d/%d: ALL OK" % (rank, np_) in result.stdout, launch.describe(result)


@pytest.mark.parametrize("controller,np_", [("mpi", 2), ("gloo", 2), ("gloo", 3)])
def test_tensorflow_adasum(controller, np_):
    run("workers/tf_adasum.py", controller, np_)


@pytest.mark.parametrize("controller,np_", [("mpi", 2), ("gloo", 2), ("mpi", 3)])
def test_mxnet_adasum(controller, np_):
    run("workers/mxnet_adasum.py", controller, np_)
