"""tutti.numpy's way into the core (the CPython module tutti.common._host_requests) on 2 and
3 ranks under MPI and Gloo (workers/host_requests.py): the arrays it accepts, a refused call
that leaves no trace, the module's own argument errors, allreduce_async_'s short path and
its native handle (timeout, failure, a handle dropped in flight), the one native calls of
allreduce_, broadcast_ and allgather (what they decline, a name in flight, a wrong root, a
failure), and an allreduce_ and an allgather interrupted by Ctrl-C (each request kept until
done, then released); with the single copy forced on or off, the counter of collectives
that took it."""

import sys

import pytest

import launch

WORKER = launch.worker("workers/host_requests.py")


@pytest.mark.parametrize("np_,controller,single_copy,streaming", [
    (2, "mpi", None, None), (3, "mpi", None, None), (2, "gloo", None, None),
    (3, "gloo", None, None), (2, "mpi", "on", "on"), (3, "gloo", "on", None),
    (2, "gloo", "off", "off"), (3, "mpi", "off", "on"),
])
def test_host_requests(np_, controller, single_copy, streaming):
    env = None
    if single_copy is not None:
        env = {"TUTTI_SHM_SINGLE_COPY": single_copy,
               "TUTTI_TEST_SINGLE_COPY": "1" if launch.kernel_allows_single_copy() else "0"}
        if streaming is not None:
            env["TUTTI_SHM_STREAMING_STORES"] = streaming
    result = launch.run_ranks(np_, [sys.executable, WORKER], controller=controller, env=env)
    print(result.stdout)
    assert result.returncode == 0, launch.describe(result)
    assert "FAIL" not in result.stdout, launch.describe(result)
    for rank in range(np_):
        # Rank 0 also checks the interruptions, the native handle's timeout and a plain
        # call refused for its name; the others, the late allgather's result.
        cases = 43 if rank == 0 else 40
        cases += single_copy is not None  # the 4 MiB sum
        assert "rank %d/%d: %d cases ok, 0 failed" % (rank, np_, cases) in result.stdout, \
            launch.describe(result)
        if rank == 0:
            assert ("rank 0: native_handle: request 'native.late' did not complete within "
                    "0.05 seconds") in result.stdout, launch.describe(result)
            assert ("rank 0: plain_run: a request named 'plain.dup' is already in flight; "
                    "names must be unique among pending requests") in result.stdout, \
                launch.describe(result)
        if single_copy is not None:
            took = 1 if single_copy == "on" and env["TUTTI_TEST_SINGLE_COPY"] == "1" else 0
            assert "rank %d: single_copy_counter: %s: %d" % (rank, single_copy, took) \
                in result.stdout, launch.describe(result)
        for line in (
            "arrays: an in-place operation needs a writeable array",
            "arrays: grouped read_only: an in-place operation needs a writeable array",
            "arrays: grouped strided: an in-place operation needs a C-contiguous array",
            "arrays: grouped list: an in-place operation needs a numpy.ndarray, got list",
            "refused: tutti does not support dtype complex64; supported: uint8, int8",
            "refused: next is grouped_allreduce.noname.0",
            "misuse: inputs: inputs must be a list of arrays, not tuple",
            "misuse: count: submit() takes 16 arguments (1 given)",
            "misuse: splits: splits, received_splits and result must be int32 arrays",
            "misuse: run_count: run_in_place() takes 9 arguments (2 given)",
            "misuse: run_arrays: arrays must be a list of arrays, not numpy.ndarray",
            "in_place_async: an in-place operation needs a writeable array",
            "interrupted: ok",
            "native_handle: allreduce of tensor 'native.mismatch': ranks disagree: shape "
            "differs: " + "; ".join("[%d] on rank %d" % (r + 2, r) for r in range(np_)),
            "native_handle: count: submit_plain() takes 7 arguments (1 given)",
            "native_handle: collective: 'str' object cannot be interpreted as an integer",
            "plain_run: allreduce of tensor 'plain.mismatch': ranks disagree: shape "
            "differs: " + "; ".join("[%d] on rank %d" % (r + 2, r) for r in range(np_)),
            "plain_run: count: run_plain() takes 7 arguments (1 given)",
            "plain_broadcast: broadcast of 'plain.bcast.wrong': root_rank %d is out of range "
            "for a process set of size %d" % (np_ + 3, np_),
            "plain_allgather: allgather of tensor 'plain.gather.mismatch': ranks disagree: "
            "shape (all but the first dimension) differs: "
            + "; ".join("[%d] on rank %d" % (r + 2, r) for r in range(np_)),
            "plain_allgather: count: allgather_plain() takes 3 arguments (1 given)",
        ):
            assert "rank %d: %s" % (rank, line) in result.stdout, launch.describe(result)
