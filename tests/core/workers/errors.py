"""Every error a user can provoke in a running job, one scenario after another:
`errors.py [scenario ...]` (default: all).

For each scenario every rank prints exactly one line, "rank R: <scenario>: <Class>: <message>"
for the error it saw or "rank R: <scenario>: ok" when it saw none (a rank that only helps the
others), then the job proves it still works with an allreduce. Exits 1 if it does not.
"""

import sys
import time

import numpy as np

import tutti.numpy as hvd
from reference import say


def mismatch_shape_allreduce(rank, size):
    return hvd.allreduce(np.ones(rank + 2, np.float32), name="m.shape")


def mismatch_shape_allgather(rank, size):
    # The first dimension may differ, the others must not.
    return hvd.allgather(np.ones((2, 1 + (rank % 2)), np.int32), name="m.gather")


def mismatch_shape_broadcast(rank, size):
    return hvd.broadcast(np.ones((2, 2) if rank == 0 else (4,), np.float64), 0, name="m.bcast")


def mismatch_dtype(rank, size):
    return hvd.allgather(np.ones(3, np.float32 if rank == 0 else np.float64), name="m.dtype")


def mismatch_op(rank, size):
    op = hvd.Sum if rank == 0 else hvd.Max
    return hvd.reducescatter(np.ones((size, 2), np.float32), op=op, name="m.op")


def mismatch_root(rank, size):
    return hvd.broadcast(np.ones(3, np.float32), root_rank=min(rank, 1), name="m.root")


def mismatch_collective(rank, size):
    x = np.ones((size, 2), np.float32)
    if rank == 0:
        return hvd.allreduce(x, name="m.collective")
    return hvd.allgather(x, name="m.collective")


def mismatch_prescale(rank, size):
    return hvd.allreduce(np.ones(3, np.float32), op=hvd.Sum, prescale_factor=1.0 + rank,
                         name="m.prescale")


def mismatch_group_size(rank, size):
    arrays = [np.ones(2, np.float32)] * (1 + (rank == 0))
    return hvd.grouped_allreduce(arrays, name="m.group")


def duplicate_name(rank, size):
    x = np.ones(3, np.float32)
    if rank == 0:
        first = hvd.allgather_async(x, name="dup")
        try:
            hvd.allgather_async(x, name="dup")
        finally:
            hvd.synchronize(first, timeout=60)
    else:
        time.sleep(0.5)  # rank 0's first request stays in flight meanwhile
        hvd.allgather(x, name="dup")


def synchronize_timeout(rank, size):
    # Rank 0 waits with a timeout while the others are late; the request itself goes on.
    x = np.ones(2, np.float32)
    if rank == 0:
        handle = hvd.allreduce_async(x, op=hvd.Sum, name="late")
        try:
            hvd.synchronize(handle, timeout=0.2)
        finally:
            got = hvd.synchronize(handle, timeout=60)
            assert np.array_equal(got, np.full(2, size, np.float32)), got
    else:
        time.sleep(1.0)
        hvd.allreduce(x, op=hvd.Sum, name="late")


def wrong_root(rank, size):
    return hvd.broadcast(np.ones(3, np.float32), root_rank=size, name="wrong.root")


def negative_root(rank, size):
    return hvd.broadcast(np.ones(3, np.float32), root_rank=-1, name="negative.root")


def splits_sum(rank, size):
    return hvd.alltoall(np.ones((4, 2), np.float32), splits=[1] * size, name="splits.sum")


def splits_negative(rank, size):
    return hvd.alltoall(np.ones((1, 2), np.float32), splits=[2, -1] + [0] * (size - 2),
                        name="splits.negative")


def splits_length(rank, size):
    return hvd.alltoall(np.ones((4, 2), np.float32), splits=[4], name="splits.length")


def splits_indivisible(rank, size):
    return hvd.alltoall(np.ones((size + 1, 2), np.float32), name="splits.indivisible")


def unsupported_dtype(rank, size):
    return hvd.allreduce(np.ones(3, np.complex64), name="complex")


def bool_average_allreduce(rank, size):
    return hvd.allreduce(np.ones(3, np.bool_), op=hvd.Average, name="bool.avg")


def bool_average_reducescatter(rank, size):
    return hvd.reducescatter(np.ones((size, 2), np.bool_), name="bool.avg.rs")


def scalar_allgather(rank, size):
    return hvd.allgather(np.float32(1.0), name="scalar.gather")


def grouped_mixed_dtypes(rank, size):
    return hvd.grouped_allreduce([np.ones(2, np.float32), np.ones(2, np.int32)], name="mixed")


def not_in_process_set(rank, size):
    first = hvd.add_process_set([0])
    try:
        return hvd.allreduce(np.ones(2, np.float32), name="not.member", process_set=first)
    finally:
        hvd.remove_process_set(first)


def unregistered_process_set(rank, size):
    return hvd.allreduce(np.ones(2, np.float32), process_set=hvd.ProcessSet([0, 1]))


def removed_process_set(rank, size):
    pair = hvd.add_process_set([0, 1])
    hvd.remove_process_set(pair)
    return hvd.allgather(np.ones(2, np.float32), process_set=pair)


def process_set_rank_outside(rank, size):
    return hvd.add_process_set([0, size])


def process_set_duplicate_ranks(rank, size):
    return hvd.add_process_set([1, 0, 1])


def process_set_registered_twice(rank, size):
    pair = hvd.add_process_set([0, 1])
    try:
        return hvd.add_process_set(hvd.ProcessSet([1, 0]))
    finally:
        hvd.remove_process_set(pair)


def process_set_ranks_differ(rank, size):
    return hvd.add_process_set([0] if rank == 0 else [0, 1])


def remove_global_process_set(rank, size):
    if hvd.remove_process_set(hvd.global_process_set) is not False:
        raise AssertionError("remove_process_set(global_process_set) must return False")


def not_contiguous_in_place(rank, size):
    return hvd.allreduce_(np.ones((4, 4), np.float32)[:, ::2])


def empty_name(rank, size):
    return hvd.allgather(np.ones(2), name="")


SCENARIOS = [
    mismatch_shape_allreduce, mismatch_shape_allgather, mismatch_shape_broadcast,
    mismatch_dtype, mismatch_op, mismatch_root, mismatch_collective, mismatch_prescale,
    mismatch_group_size, duplicate_name, synchronize_timeout, wrong_root, negative_root, splits_sum,
    splits_negative, splits_length, splits_indivisible, unsupported_dtype,
    bool_average_allreduce, bool_average_reducescatter, scalar_allgather,
    grouped_mixed_dtypes, not_in_process_set, unregistered_process_set, removed_process_set,
    process_set_rank_outside, process_set_duplicate_ranks, process_set_registered_twice,
    process_set_ranks_differ, remove_global_process_set, not_contiguous_in_place, empty_name,
]


def main(names):
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    chosen = [s for s in SCENARIOS if not names or s.__name__ in names]
    for scenario in chosen:
        try:
            scenario(rank, size)
            say("rank %d: %s: ok" % (rank, scenario.__name__))
        except (hvd.TuttiError, TimeoutError) as exc:
            say("rank %d: %s: %s: %s" % (rank, scenario.__name__, type(exc).__name__, exc))
        got = hvd.allreduce(np.full(2, rank, np.int32), op=hvd.Sum,
                            name="after." + scenario.__name__)
        assert np.array_equal(got, np.full(2, sum(range(size)), np.int32)), got
    say("rank %d: all scenarios done" % rank)
    hvd.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
