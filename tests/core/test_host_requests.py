"""tutti.numpy's way into the core (the CPython module tutti.common._host_requests) on 2 and
3 ranks under MPI and Gloo (workers/host_requests.py): the arrays it accepts, a refused call
that leaves no trace, the module's own argument errors, allreduce_async_'s short path and
its native handle (timeout, failure, a handle dropped in flight), allreduce_'s one native
call (what it declines, a name in flight, a failure), and an allreduce_ interrupted by Ctrl-C (its request kept until done, then released); with the
single copy forced on or off, the counter of collectives that took it."""

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
        # Rank 0 also checks the interruption, the native handle's timeout and a plain
        # call refused for its name.
        cases = 32 if rank == 0 else 29
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
        ):
            assert "rank %d: %s" % (rank, line) in result.stdout, launch.describe(result)
