"""tutti.torch allgather, broadcast, alltoall, reducescatter, grouped ops, process sets,
join, barrier, gradients, object and optimizer-state broadcasts on real processes: 2 and 3
ranks under MPI (mpirun) and Gloo (tuttirun), and one process without a launcher."""

import sys

import pytest

import launch


def _assert_ok(result, size):
    assert result.returncode == 0, launch.describe(result)
    for rank in range(size):
        assert "rank %d/%d:" % (rank, size) in result.stdout, launch.describe(result)
    assert "FAIL" not in result.stdout, launch.describe(result)


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_collectives_matrix(controller, size):
    result = launch.run_ranks(size, [sys.executable, launch.worker("workers/collectives_matrix.py")],
                              controller, timeout=300)
    _assert_ok(result, size)


def test_collectives_matrix_single_process():
    result = launch.run([sys.executable, launch.worker("workers/collectives_matrix.py")],
                        timeout=300)
    _assert_ok(result, 1)
