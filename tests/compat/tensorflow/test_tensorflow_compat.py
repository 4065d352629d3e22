"""Horovod 0.28.1 compatibility of tutti.tensorflow: a Horovod-style script on 2 and 3
ranks under MPI (mpirun) and Gloo (tuttirun); every rank must report its checks passed."""

import re
import sys

import pytest

import launch

CHECKS = launch.worker("workers/horovod_tf_checks.py")
# Imports TensorFlow and Keras (seconds), traces functions and fits small models; 3 ranks
# share 2 cores.
TIMEOUT = 400


@pytest.mark.parametrize("controller,np", [("mpi", 2), ("gloo", 2), ("mpi", 3), ("gloo", 3)])
def test_horovod_script_runs_unchanged(controller, np):
    result = launch.run_ranks(np, [sys.executable, CHECKS, str(np)], controller,
                              timeout=TIMEOUT)
    assert result.returncode == 0, launch.describe(result)
    passed = {int(r): int(n) for r, n in re.findall(r"rank (\d+): (\d+) checks passed",
                                                    result.stdout)}
    assert sorted(passed) == list(range(np)), launch.describe(result)
    assert all(count >= 100 for count in passed.values()), launch.describe(result)
