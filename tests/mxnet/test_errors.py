"""Errors: before init, core failures raised as MXNetError on read, bad arguments."""

import sys

import pytest
from launch import describe, run, run_ranks, worker


def test_collective_before_init_names_the_fix():
    result = run([sys.executable, worker("workers/before_init_worker.py")], timeout=60)
    assert result.returncode == 0, describe(result)
    assert "call hvd.init() first" in result.stdout, describe(result)
    assert "before-init checks passed" in result.stdout, describe(result)


@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_core_error_raises_mxnet_error_and_process_continues(controller):
    result = run_ranks(2, [sys.executable, worker("workers/errors_worker.py")], controller)
    assert result.returncode == 0, describe(result)
    for rank in range(2):
        assert "rank %d: error checks passed" % rank in result.stdout, describe(result)
