"""Every error a user can provoke in a running job, with the exact message each rank gets,
under MPI and Gloo on 2 and 3 ranks (workers/errors.py); and after each one, the job still
works."""

import re
import sys

import pytest

import launch

WORKER = launch.worker("workers/errors.py")


def ranks(numbers):
    numbers = list(numbers)
    return ("rank " if len(numbers) == 1 else "ranks ") + ", ".join(map(str, numbers))


def others(size):
    """How the core names every rank but 0."""
    return ranks(range(1, size))


BOOL_AVERAGE = ("AVERAGE is not defined for bool tensors; use SUM or MAX (logical or) or MIN "
                "or PRODUCT (logical and)")
NOT_REGISTERED = ("InvalidArgumentError: ProcessSet(ranks=[0, 1]) is not registered; register "
                  "it with add_process_set() or init(process_sets=...) first")


def expected(scenario, rank, size):
    """The line rank `rank` of a `size`-rank job prints for `scenario` (without the prefix)."""
    mismatch = "PreconditionError: %s of tensor '%s': ranks disagree: "
    table = {
        "mismatch_shape_allreduce": mismatch % ("allreduce", "m.shape") + "shape differs: "
        + "; ".join("[%d] on rank %d" % (r + 2, r) for r in range(size)),
        "mismatch_shape_allgather": mismatch % ("allgather", "m.gather")
        + "shape (all but the first dimension) differs: [1] on %s; [2] on rank 1"
        % ranks(r for r in range(size) if r % 2 == 0),
        "mismatch_shape_broadcast": mismatch % ("broadcast", "m.bcast")
        + "shape differs: [2, 2] on rank 0; [4] on %s" % others(size),
        "mismatch_dtype": mismatch % ("allgather", "m.dtype")
        + "dtype differs: float32 on rank 0; float64 on %s" % others(size),
        "mismatch_op": mismatch % ("reducescatter", "m.op")
        + "reduce op differs: sum on rank 0; max on %s" % others(size),
        "mismatch_root": mismatch % ("broadcast", "m.root")
        + "root_rank differs: 0 on rank 0; 1 on %s" % others(size),
        "mismatch_prescale": mismatch % ("allreduce", "m.prescale") + "prescale differs: "
        + "; ".join("%d on rank %d" % (r + 1, r) for r in range(size)),
        "mismatch_group_size": mismatch % ("allreduce", "m.group")
        + "number of tensors differs: 2 on rank 0; 1 on %s; shape differs: [2], [2] on rank 0; "
        "[2] on %s" % (others(size), others(size)),
        "duplicate_name": "InvalidArgumentError: a request named 'dup' is already in flight; names "
        "must be unique among pending requests (wait for the first one before resubmitting)"
        if rank == 0 else "ok",
        "synchronize_timeout": "TimeoutError: request 'late' did not complete within 0.2 "
        "seconds" if rank == 0 else "ok",
        "wrong_root": "InvalidArgumentError: broadcast of 'wrong.root': root_rank %d is out of "
        "range for a process set of size %d" % (size, size),
        "negative_root": "InvalidArgumentError: broadcast of 'negative.root': root_rank -1 is "
        "out of range for a process set of size %d" % size,
        "splits_sum": "InvalidArgumentError: alltoall of 'splits.sum': splits sum to %d but the "
        "first dimension is 4" % size,
        "splits_negative": "InvalidArgumentError: alltoall of 'splits.negative': splits[1] is "
        "negative (-1)",
        "splits_length": "InvalidArgumentError: alltoall splits must list one row count per "
        "rank of the process set (%d entries), got [4]" % size,
        "splits_indivisible": "InvalidArgumentError: alltoall of 'splits.indivisible': the "
        "first dimension %d is not divisible by the process set size %d; pass splits to send "
        "unequal parts" % (size + 1, size),
        "unsupported_dtype": "InvalidArgumentError: tutti does not support dtype complex64; "
        "supported: uint8, int8, uint16, int16, int32, int64, float16, bfloat16, float32, "
        "float64, bool",
        "bool_average_allreduce": "InvalidArgumentError: allreduce of 'bool.avg': "
        + BOOL_AVERAGE,
        "bool_average_reducescatter": "InvalidArgumentError: reducescatter of 'bool.avg.rs': "
        + BOOL_AVERAGE,
        "scalar_allgather": "InvalidArgumentError: allgather of 'scalar.gather': input is a "
        "scalar; allgather needs at least one dimension",
        "grouped_mixed_dtypes": "InvalidArgumentError: allreduce of 'mixed': all tensors of a "
        "grouped request need one dtype: input 1 is int32, input 0 is float32",
        "not_in_process_set": "InvalidArgumentError: rank %d is not in ProcessSet(ranks=[0], "
        "id 1): only its members may run collectives on it" % rank if rank else "ok",
        "unregistered_process_set": NOT_REGISTERED,
        "removed_process_set": NOT_REGISTERED,
        "process_set_rank_outside": "InvalidArgumentError: process set ranks [%d] are outside "
        "the job: ranks go from 0 to %d" % (size, size - 1),
        "process_set_duplicate_ranks": "InvalidArgumentError: process set ranks must be "
        "distinct; [1] appear more than once in [1, 0, 1]",
        "process_set_registered_twice": "InvalidArgumentError: a process set with ranks [0, 1] "
        "is already registered (id 3)",
        "process_set_ranks_differ": "PreconditionError: add_process_set of tensor "
        "'tutti.process_set_change.6': ranks disagree: process set ranks differs: [0] on rank "
        "0; [0, 1] on %s" % others(size),
        # Horovod 0.28.1 returns False instead of raising.
        "remove_global_process_set": "ok",
        "not_contiguous_in_place": "InvalidArgumentError: an in-place operation needs a "
        "C-contiguous array; pass numpy.ascontiguousarray(array) or use the out-of-place "
        "function",
        "empty_name": "InvalidArgumentError: name must be a non-empty string, got ''",
    }
    return table[scenario]


# Scenarios whose message is checked by its start only, and why.
PREFIXES = {
    # The core also lists fields that differ only because the collectives do.
    "mismatch_collective": lambda rank, size: (
        "PreconditionError: allreduce of tensor 'm.collective': ranks disagree: collective "
        "differs: allreduce on rank 0; allgather on %s" % others(size)),
}


@pytest.fixture(scope="module", params=[("mpi", 2), ("mpi", 3), ("gloo", 2), ("gloo", 3)],
                ids=lambda p: "%s-np%d" % p)
def job(request):
    controller, size = request.param
    result = launch.run_ranks(size, [sys.executable, WORKER], controller=controller,
                              env={"TUTTI_GLOO_TIMEOUT_SECONDS": "30"}, timeout=150)
    print(result.stdout)  # the messages are the point of these tests: keep them in the log
    assert result.returncode == 0, launch.describe(result)
    lines = {}
    for match in re.finditer(r"^(?:\[\d+\]<stdout>: )?rank (\d+): (\w+): (.*)$",
                             result.stdout, re.M):
        lines[(match.group(2), int(match.group(1)))] = match.group(3)
    for rank in range(size):
        assert "rank %d: all scenarios done" % rank in result.stdout, launch.describe(result)
    return size, lines, result


SCENARIOS = [
    "mismatch_shape_allreduce", "mismatch_shape_allgather", "mismatch_shape_broadcast",
    "mismatch_dtype", "mismatch_op", "mismatch_root", "mismatch_collective",
    "mismatch_prescale", "mismatch_group_size", "duplicate_name", "synchronize_timeout",
    "wrong_root", "negative_root",
    "splits_sum", "splits_negative", "splits_length", "splits_indivisible",
    "unsupported_dtype", "bool_average_allreduce", "bool_average_reducescatter",
    "scalar_allgather", "grouped_mixed_dtypes", "not_in_process_set",
    "unregistered_process_set", "removed_process_set", "process_set_rank_outside",
    "process_set_duplicate_ranks", "process_set_registered_twice", "process_set_ranks_differ",
    "remove_global_process_set", "not_contiguous_in_place", "empty_name",
]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_rank_gets_the_expected_message(job, scenario):
    size, lines, result = job
    for rank in range(size):
        got = lines.get((scenario, rank))
        assert got is not None, "rank %d printed nothing for %s\n%s" % (
            rank, scenario, launch.describe(result))
        if scenario in PREFIXES:
            assert got.startswith(PREFIXES[scenario](rank, size)), got
        else:
            assert got == expected(scenario, rank, size), "rank %d" % rank


def test_errors_leave_no_warnings_behind(job):
    size, lines, result = job
    assert "warning" not in result.stderr, result.stderr


def test_the_worker_runs_every_scenario_listed_here():
    sys.path.insert(0, launch.worker("workers"))
    try:
        import errors
    finally:
        sys.path.pop(0)
    assert [s.__name__ for s in errors.SCENARIOS] == SCENARIOS
