"""tutti.torch collectives on real processes: 2 ranks under MPI (mpirun) and Gloo
(tuttirun), and one process without a launcher."""

import os
import sys

import pytest

import launch

CONTROLLERS = ["mpi", "gloo"]
EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                       "frameworks", "torch", "examples", "allreduce_smoke.py")


def _assert_ok(result, *expected_lines):
    assert result.returncode == 0, launch.describe(result)
    for line in expected_lines:
        assert line in result.stdout, launch.describe(result)


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_allreduce_matrix_two_ranks(controller):
    result = launch.run_ranks(
        2, [sys.executable, launch.worker("workers/allreduce_matrix.py")], controller, timeout=240)
    _assert_ok(result, "rank 0/2:", "rank 1/2:", " 0 failed")
    assert "FAIL" not in result.stdout, launch.describe(result)


def test_allreduce_matrix_single_process():
    result = launch.run([sys.executable, launch.worker("workers/allreduce_matrix.py")])
    _assert_ok(result, "rank 0/1:", " 0 failed")


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_errors_surface_as_exceptions(controller):
    result = launch.run_ranks(
        2, [sys.executable, launch.worker("workers/errors.py")], controller, timeout=120)
    _assert_ok(result, "rank 0: 0 failures", "rank 1: 0 failures",
               "ok dtype_mismatch", "ok gil_released_while_waiting",
               "ok grouped_allreduce_is_one_request", "ok optimizer_group_is_one_request",
               "ok plain_int_refused", "ok wait_timeout_returns_pending",
               "ok unnamed_shape_mismatch", "ok name_not_a_string",
               "ok pending_at_shutdown", "ok blocking_calls_run_cycles_here",
               "ok numpy_beside_blocking_torch", "ok blocking_call_releases_the_gil",
               "ok native_args.input_not_a_tensor", "ok native_args.splits_not_ints",
               "ok numpy_beside_async_torch", "ok duplicate_name_blocking",
               "ok plain_run.declined", "ok plain_run.ran", "ok native_args.run_plain_count",
               "ok plain_run.async", "ok plain_run.synchronize_twice",
               "ok native_args.enqueue_plain_count",
               "ok plain_run.interrupted", "ok plain_run.interrupted_sum",
               "ok plain_broadcast.ran", "ok plain_broadcast.declined",
               "ok plain_broadcast.wrong_root", "ok plain_allgather.ran",
               "ok plain_allgather.declined", "ok plain_allgather.gradient",
               "ok plain_allgather.mismatch")


def test_lifecycle_and_errors_before_init():
    result = launch.run([sys.executable, launch.worker("workers/lifecycle.py")])
    _assert_ok(result, "lifecycle ok")


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_example(controller):
    result = launch.run_ranks(2, [sys.executable, EXAMPLE], controller)
    _assert_ok(result, "rank 0/2 (%s)" % controller, "rank 1/2 (%s)" % controller)
    assert "WRONG" not in result.stdout, launch.describe(result)


SPARSE_SCRIPT = """
import torch
import tutti.torch as hvd
hvd.init()
sparse = torch.sparse_coo_tensor([[0, 2]], [1.0, 2.0], (4,))
for call in (hvd.allreduce, hvd.allgather, lambda t: hvd.broadcast(t, 0)):
    try:
        call(sparse)
        print("FAIL: accepted")
    except hvd.InvalidArgumentError as exc:
        print("error:", exc)
"""


def test_a_sparse_tensor_gets_tuttis_message():
    result = launch.run([sys.executable, "-c", SPARSE_SCRIPT], timeout=120)
    assert result.returncode == 0, launch.describe(result)
    expected = ("error: tutti collectives take dense tensors, not a sparse_coo tensor: call "
                ".to_dense() first (DistributedOptimizer handles sparse gradients itself; see "
                "sparse_as_dense)")
    assert result.stdout.splitlines() == [expected] * 3, launch.describe(result)
