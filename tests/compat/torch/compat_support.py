"""What the tutti.torch compatibility tests share: running a worker script on 2 and 3 ranks
under MPI and Gloo and checking every rank's summary line."""

import sys

import launch

CONTROLLERS = ["mpi", "gloo"]
SIZES = [2, 3]


def run_worker(script, controller, size, env=None, timeout=240):
    """Runs workers/`script` on `size` ranks and asserts that every rank reported and none
    printed FAIL."""
    result = launch.run_ranks(size, [sys.executable, launch.worker("workers/" + script)],
                              controller, env=env, timeout=timeout)
    assert result.returncode == 0, launch.describe(result)
    for rank in range(size):
        assert "rank %d/%d:" % (rank, size) in result.stdout, launch.describe(result)
    assert "FAIL" not in result.stdout, launch.describe(result)
