"""tutti.torch on NVIDIA GPUs. Every test here needs CUDA and is skipped without it (this
project's CI machines have none: tools/gpu-check runs these on a GPU machine).

- every collective x dtype on CUDA tensors over NCCL, on every rank count the GPUs allow
  (NCCL takes one rank per GPU);
- the staged path (TUTTI_GPU_OPERATIONS=gloo, pinned host buffers) with 2 ranks sharing GPU 0;
- training on 1 rank vs 2 ranks (DistributedOptimizer + SyncBatchNorm) against one process.
"""

import sys

import pytest
import torch

import launch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="needs an NVIDIA GPU (torch.cuda.is_available() is False)"),
]


def _gpus():
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _assert_ok(result, size):
    assert result.returncode == 0, launch.describe(result)
    for rank in range(size):
        assert "rank %d/%d:" % (rank, size) in result.stdout, launch.describe(result)
    assert "FAIL" not in result.stdout, launch.describe(result)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 8])
def test_nccl_matrix(size):
    if size > _gpus():
        pytest.skip("NCCL needs one GPU per rank: %d ranks, %d GPUs" % (size, _gpus()))
    worker = [sys.executable, launch.worker("workers/gpu_matrix.py")]
    result = (launch.run(worker, timeout=300) if size == 1
              else launch.run_ranks(size, worker, "gloo", timeout=300))
    _assert_ok(result, size)


@pytest.mark.parametrize("operations", ["gloo", "mpi"])
def test_staged_two_ranks_share_one_gpu(operations):
    result = launch.run_ranks(2, [sys.executable, launch.worker("workers/gpu_matrix.py")],
                              "gloo", env={"TUTTI_GPU_OPERATIONS": operations,
                                           "TUTTI_TEST_SHARED_GPU": "1"}, timeout=300)
    _assert_ok(result, 2)


def test_training_one_rank_matches_one_process():
    result = launch.run([sys.executable, launch.worker("workers/gpu_training.py")], timeout=180)
    _assert_ok(result, 1)


def test_training_two_ranks_match_one_process():
    env = {} if _gpus() >= 2 else {"TUTTI_GPU_OPERATIONS": "gloo", "TUTTI_TEST_SHARED_GPU": "1"}
    result = launch.run_ranks(2, [sys.executable, launch.worker("workers/gpu_training.py")],
                              "gloo", env=env, timeout=180)
    _assert_ok(result, 2)
