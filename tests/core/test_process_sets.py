"""Process sets on 3 ranks under MPI and Gloo (workers/process_sets.py): static and dynamic
sets, overlapping sets used at the same time, every collective on a set, removal, and
re-registration after shutdown -> init. Also the ProcessSet checks that need no job."""

import sys

import pytest

import launch
import tutti.common as common
from tutti.common import InvalidArgumentError, ProcessSet

WORKER = launch.worker("workers/process_sets.py")
CONTROLLERS = ["mpi", "gloo"]


@pytest.fixture(scope="module", params=CONTROLLERS)
def job(request):
    result = launch.run_ranks(3, [sys.executable, WORKER], controller=request.param,
                              env={"TUTTI_GLOO_TIMEOUT_SECONDS": "30"})
    print(result.stdout)
    return request.param, result


def test_static_dynamic_and_restarted_sets_work_on_every_rank(job):
    controller, result = job
    assert result.returncode == 0, launch.describe(result)
    assert "FAIL" not in result.stdout, launch.describe(result)
    for rank in range(3):
        for step in ("static", "dynamic", "rooted", "restart"):
            assert "rank %d: %s ok" % (rank, step) in result.stdout, launch.describe(result)
        assert "rank %d/3: " % rank in result.stdout, launch.describe(result)
        threads = "True" if controller == "mpi" else "False"
        line = "rank %d: mpi_threads_supported %s under %s" % (rank, threads, controller)
        assert line in result.stdout, launch.describe(result)


def test_a_stale_set_says_to_register_it_again(job):
    controller, result = job
    for rank in range(3):
        line = ("rank %d: stale set: ProcessSet(ranks=[1, 2]) was registered before tutti was "
                "shut down; register it again with add_process_set() or "
                "init(process_sets=...)" % rank)
        assert line in result.stdout, launch.describe(result)


def test_a_root_outside_the_set_is_refused_with_its_message(job):
    # root_rank is a global rank (Horovod 0.28.1): rank 0 is not a member of [1, 2].
    controller, result = job
    for rank in (1, 2):
        line = ("rank %d: outsider root: broadcast of 'rooted.outsider': root_rank 0 is not a "
                "member of process set 2 (ranks 1, 2)" % rank)
        assert line in result.stdout, launch.describe(result)


def test_ranks_outside_a_set_stay_quiet(job):
    controller, result = job
    assert "warning" not in result.stderr, result.stderr


def test_process_set_ranks_are_sorted_and_checked():
    assert ProcessSet([2, 0, 1]).ranks == [0, 1, 2]
    assert repr(ProcessSet([3, 1])) == "ProcessSet(ranks=[1, 3], not registered)"
    assert ProcessSet([1]).process_set_id is None
    for bad, message in [
        ([], "a process set needs at least one rank"),
        ([0, -1], "process set ranks must be non-negative integers, got -1 in [0, -1]"),
        ([0, 1.5], "process set ranks must be non-negative integers, got 1.5 in [0, 1.5]"),
        ([True], "process set ranks must be non-negative integers, got True in [True]"),
        ([2, 2, 0], "process set ranks must be distinct; [2] appear more than once in "
                    "[2, 2, 0]"),
        (3, "a process set needs a list of ranks, got 3"),
    ]:
        with pytest.raises(InvalidArgumentError) as info:
            ProcessSet(bad)
        assert str(info.value) == message


def test_the_global_set_is_always_there():
    assert common.global_process_set.process_set_id == 0
    assert repr(common.global_process_set) == "global_process_set"
    # Horovod 0.28.1 returns False for the global set and for unregistered sets.
    assert common.remove_process_set(common.global_process_set) is False
    assert common.remove_process_set(ProcessSet([0])) is False


def test_bad_process_sets_argument_fails_before_connecting():
    for bad in ("0,1", ProcessSet([0]), [[0], [1, 1]]):
        with pytest.raises(InvalidArgumentError):
            common.init(process_sets=bad)
        assert not common.is_initialized()


def test_using_a_set_before_init_asks_for_init():
    # Horovod 0.28.1: size() and rank() of a set that is not registered are None.
    assert ProcessSet([0]).size() is None and ProcessSet([0]).rank() is None
    with pytest.raises(common.NotInitializedError, match="call init"):
        ProcessSet([0]).included()
    with pytest.raises(common.NotInitializedError, match="init"):
        common.add_process_set([0])
