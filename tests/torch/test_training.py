"""Training with tutti.torch on real processes: DistributedOptimizer and SyncBatchNorm
against one process training on the concatenated batch, on 2 and 3 ranks under MPI
(mpirun) and Gloo (tuttirun) and on one process; the digits example and a short run of
the synthetic benchmark (tutti and DDP in one launch) on 2 ranks."""

import os
import sys

import pytest

import launch

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                        "frameworks", "torch", "examples")


def _assert_ok(result, *expected_lines):
    assert result.returncode == 0, launch.describe(result)
    for line in expected_lines:
        assert line in result.stdout, launch.describe(result)
    assert "FAIL" not in result.stdout, launch.describe(result)


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_training_matches_one_process(controller, size):
    result = launch.run_ranks(size, [sys.executable, launch.worker("workers/training.py")],
                              controller, timeout=300)
    _assert_ok(result, *["rank %d/%d:" % (rank, size) for rank in range(size)])


def test_training_single_process():
    result = launch.run([sys.executable, launch.worker("workers/training.py")], timeout=120)
    _assert_ok(result, "rank 0/1:")


def test_digits_example():
    script = os.path.join(EXAMPLES, "torch_digits.py")
    result = launch.run_ranks(2, [sys.executable, script, "--epochs", "8"], "gloo",
                              timeout=180)
    _assert_ok(result, "epoch 1:", "epoch 8:", "on 2 ranks; weights agree across ranks")


def test_synthetic_benchmark_runs():
    """Only that it runs and reports (figures are measured, never asserted)."""
    script = os.path.join(EXAMPLES, "pytorch_synthetic_benchmark.py")
    result = launch.run_ranks(2, [sys.executable, script, "--model", "mlp", "--batch-size",
                                  "4", "--num-iters", "2", "--num-batches-per-iter", "1",
                                  "--num-warmup-batches", "1"], "mpi", timeout=180)
    _assert_ok(result, "1 rank alone:", "tutti DistributedOptimizer:", "torch DDP (gloo):",
               "tutti / DDP throughput:", "compute-only bound:",
               "compute-only bound as the sum of the ranks' own medians")
