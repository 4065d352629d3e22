"""join() with uneven work on 2 and 3 ranks under MPI and Gloo (workers/join.py): joined
ranks contribute zeros, join returns the last rank, other collectives fail while a rank has
joined, and unnamed requests match again after join."""

import sys

import pytest

import launch

WORKER = launch.worker("workers/join.py")


@pytest.mark.parametrize("np_", [2, 3])
@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_join_with_uneven_work(controller, np_):
    result = launch.run_ranks(np_, [sys.executable, WORKER], controller=controller,
                              env={"TUTTI_GLOO_TIMEOUT_SECONDS": "30"})
    print(result.stdout)
    assert result.returncode == 0, launch.describe(result)
    assert "FAIL" not in result.stdout, launch.describe(result)
    assert "warning" not in result.stderr, launch.describe(result)
    last = np_ - 1
    for rank in range(np_):
        steps = 2 + 2 * rank
        assert "rank %d: uneven: %d steps, join returned %d" % (rank, steps, last) \
            in result.stdout, launch.describe(result)
        assert "rank %d: others: join returned %d" % (rank, last) in result.stdout
        assert "rank %d: after: ok" % rank in result.stdout
        if rank == 0:
            continue
        for collective, name in (("allgather", "while.joined.ag"),
                                 ("broadcast", "while.joined.bc")):
            line = ("rank %d: others: %s: %s of tensor '%s': rank 0 has joined (called join()) "
                    "and cannot take part; only allreduce runs while ranks are joined"
                    % (rank, collective, collective, name))
            assert line in result.stdout, launch.describe(result)
