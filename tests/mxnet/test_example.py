"""The examples run: the Gluon digits example trains to >= 0.9 validation accuracy on 2
ranks with identical weights, and the synthetic benchmark prints its comparison."""

import os
import re
import sys

import pytest
from launch import describe, run_ranks

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                        "frameworks", "mxnet", "examples")


@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_gluon_digits_example(controller):
    result = run_ranks(2, [sys.executable, os.path.join(EXAMPLES, "gluon_digits.py")],
                       controller, timeout=180)
    assert result.returncode == 0, describe(result)
    assert "weights identical on all 2 ranks: yes" in result.stdout, describe(result)
    assert re.search(r"epoch 10 .* validation accuracy", result.stdout), describe(result)
    accuracy = float(re.search(r"final validation accuracy ([0-9.]+)", result.stdout).group(1))
    assert accuracy >= 0.9, describe(result)


def test_synthetic_benchmark_runs_every_phase():
    # A few tiny iterations: this checks that the benchmark works, not how fast it is.
    result = run_ranks(2, [sys.executable, os.path.join(EXAMPLES, "mxnet_synthetic_benchmark.py"),
                           "--model", "mlp", "--batch-size", "8", "--num-warmup-batches", "1",
                           "--num-batches-per-iter", "1", "--num-iters", "2", "--num-groups", "2"],
                       "mpi", timeout=120)
    assert result.returncode == 0, describe(result)
    for line in ("tutti DistributedTrainer, 2 ranks:", "tutti DistributedTrainer, 1 rank:",
                 "MXNet kvstore='local', 1 process, 2 ctxs:", "scaling efficiency",
                 "tutti 2 ranks / MXNet local kvstore:", "tutti / compute-only bound:",
                 "tutti / the bound as the sum of the ranks' own rates"):
        assert line in result.stdout, describe(result)
