"""Adasum through tutti.numpy on 2 and 4 ranks (refused on 3, as Horovod refuses it), under
MPI and Gloo, with the same-host shared-memory transport (default) and without it (then the
pairwise steps run over MPI_Sendrecv and Gloo's point-to-point buffers)."""

import sys

import pytest

import launch

WORKER = launch.worker("workers/numpy_adasum.py")


def run(controller, np_, env=None):
    result = launch.run_ranks(np_, [sys.executable, WORKER], controller=controller, env=env,
                              timeout=240)
    assert result.returncode == 0, launch.describe(result)
    for rank in range(np_):
        assert "rank %d/%d: ALL OK" % (rank, np_) in result.stdout, launch.describe(result)
    return result


@pytest.mark.parametrize("np_", [2, 3, 4])
@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_adasum_matches_reference(controller, np_):
    run(controller, np_)


@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_adasum_over_the_transport_without_shared_memory(controller):
    run(controller, 4, env={"TUTTI_SHM": "off"})


def test_adasum_on_two_simulated_hosts():
    # Ranks 0-1 and 2-3 on two hosts: the global set's pairwise steps cross the hosts over
    # Gloo, the process set [0, 1] stays in one host's shared memory.
    run_gloo = launch.worker("../../../common/tests/run_gloo.py")
    result = launch.run([sys.executable, run_gloo, "-np", "4", "--hosts", "2", "--timeout",
                         "200", "--", sys.executable, WORKER], timeout=240)
    assert result.returncode == 0, launch.describe(result)
    for rank in range(4):
        assert "rank %d/4: ALL OK" % rank in result.stdout, launch.describe(result)


def test_adasum_without_response_cache():
    run("gloo", 2, env={"TUTTI_CACHE_CAPACITY": "0"})


def test_adasum_alone():
    result = launch.run([sys.executable, WORKER], env={"TUTTI_CONTROLLER": ""})
    assert result.returncode == 0, launch.describe(result)
    assert "rank 0/1: ALL OK" in result.stdout, launch.describe(result)
