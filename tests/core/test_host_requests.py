"""tutti.numpy's way into the core (the CPython module tutti.common._host_requests) on 2 and
3 ranks under MPI and Gloo (workers/host_requests.py): the arrays it accepts, a refused call
that leaves no trace, the module's own argument errors, allreduce_async_'s short path, and
an allreduce_ interrupted by Ctrl-C (its request kept until done, then released)."""

import sys

import pytest

import launch

WORKER = launch.worker("workers/host_requests.py")


@pytest.mark.parametrize("np_", [2, 3])
@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_host_requests(controller, np_):
    result = launch.run_ranks(np_, [sys.executable, WORKER], controller=controller)
    print(result.stdout)
    assert result.returncode == 0, launch.describe(result)
    assert "FAIL" not in result.stdout, launch.describe(result)
    for rank in range(np_):
        cases = 17 if rank == 0 else 16  # rank 0 also checks the interruption
        assert "rank %d/%d: %d cases ok, 0 failed" % (rank, np_, cases) in result.stdout, \
            launch.describe(result)
        for line in (
            "arrays: an in-place operation needs a writeable array",
            "refused: tutti does not support dtype complex64; supported: uint8, int8",
            "refused: next is grouped_allreduce.noname.0",
            "misuse: inputs: inputs must be a list of arrays, not tuple",
            "misuse: count: submit() takes 16 arguments (1 given)",
            "misuse: splits: splits, received_splits and result must be int32 arrays",
            "misuse: run_count: run_in_place() takes 9 arguments (2 given)",
            "misuse: run_arrays: arrays must be a list of arrays, not numpy.ndarray",
            "in_place_async: an in-place operation needs a writeable array",
            "interrupted: ok",
        ):
            assert "rank %d: %s" % (rank, line) in result.stdout, launch.describe(result)
