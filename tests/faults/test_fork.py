"""fork() after init(): the child must leave the parent's job alone, whether it exits
normally (exit hooks run) or with os._exit, and its own collectives fail at once with a
message saying to call init() in the child. Gloo (shared memory on and off) and MPI."""

import sys

import pytest

import launch
from scenario import scenario

WORKER = launch.worker("workers/fork_child.py")

JOBS = {
    "gloo": ("gloo", {"TUTTI_SHM": "off"}),
    "gloo-shm": ("gloo", {"TUTTI_SHM": "on"}),
    "mpi": ("mpi", {}),
}


@scenario("fork-after-init")
@pytest.mark.parametrize("job", sorted(JOBS))
@pytest.mark.parametrize("mode", ["exit", "os_exit"])
def test_a_forked_child_leaves_the_parent_job_healthy(job, mode):
    controller, env = JOBS[job]
    env = dict(env, TUTTI_GLOO_TIMEOUT_SECONDS="20")
    result = launch.run_ranks(2, [sys.executable, WORKER, mode], controller=controller,
                              env=env, timeout=120)
    assert result.returncode == 0, launch.describe(result)
    for rank in range(2):
        assert "rank %d: parent ok after the child" % rank in result.stdout, \
            launch.describe(result)
        assert ("rank %d: child said: NotInitializedError: this process is a fork of process "
                % rank) in result.stdout, launch.describe(result)
    assert "call init() in the child process to use tutti in it" in result.stdout
