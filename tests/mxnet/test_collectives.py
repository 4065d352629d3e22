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
    # root_rank is a global rank: rank 0 is no member of [1, ..., np - 1].
    members = ", ".join(str(r) for r in range(1, np_))
    expected = ("broadcast of 'root_not_member': root_rank 0 is not a member of process set 1 "
                "(ranks %s)" % members)
    for rank in range(1, np_):
        prefix = "rank %d: root outside the set -> MXNetError: " % rank
        lines = [line for line in result.stdout.splitlines() if prefix in line]
        assert len(lines) == 1 and expected in lines[0], describe(result)
