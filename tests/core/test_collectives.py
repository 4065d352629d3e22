"""tutti.numpy allgather, broadcast, alltoall, reducescatter, their grouped forms, grouped
allreduce and barrier, for every dtype x 1-3 dims (x every reduction where one applies), on
2 and 3 ranks under MPI and Gloo and alone, against numpy references
(workers/collectives_matrix.py)."""

import re
import sys

import pytest

import launch

WORKER = launch.worker("workers/collectives_matrix.py")


def check_summary(result, size):
    assert result.returncode == 0, launch.describe(result)
    assert "FAIL" not in result.stdout, launch.describe(result)
    counts = set()
    for rank in range(size):
        match = re.search(r"rank %d/%d: (\d+) cases ok, 0 failed" % (rank, size), result.stdout)
        assert match, launch.describe(result)
        counts.add(int(match.group(1)))
    # Every rank checks the same cases; well over a thousand of them.
    assert len(counts) == 1 and counts.pop() > 1000, launch.describe(result)


@pytest.mark.parametrize("np_", [2, 3])
@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_every_collective_dtype_and_reduction(controller, np_):
    result = launch.run_ranks(np_, [sys.executable, WORKER], controller=controller, timeout=240)
    check_summary(result, np_)


def test_every_collective_alone():
    result = launch.run([sys.executable, WORKER], env={"TUTTI_CONTROLLER": ""})
    check_summary(result, 1)
