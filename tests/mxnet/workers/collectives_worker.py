"""Checks every collective of tutti.mxnet for every dtype x rank 0-3 (and every op for the
reductions) against numpy, plus process sets, objects, compression, barrier and join with
uneven work. Runs on 2 or 3
ranks; prints "rank R: collective cases passed" on success.

Every rank computes all ranks' inputs (they depend only on the rank), so it can check its
results against numpy.
"""

import sys

import tutti.mxnet as hvd

import mxnet as mx
import numpy as np
from allreduce_worker import (DTYPES, OPS, SHAPES, check_allreduce, expected, rank_input,
                              to_mxnet, to_numpy)

FLOATS = ("float16", "bfloat16", "float32", "float64")


def ops_for(dtype):
    """Every op, less Average for bool (undefined; see the error tests)."""
    return [op for op in OPS if not (dtype == "bool" and op == hvd.Average)]


def assert_equal(got, want, dtype, label):
    got = to_numpy(got)
    assert got.shape == want.shape, "%s: shape %s, want %s" % (label, got.shape, want.shape)
    if dtype in ("float16", "bfloat16"):
        np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2, err_msg=label)
    else:
        np.testing.assert_array_equal(got, np.asarray(want).astype(got.dtype), err_msg=label)


def rows_input(dtype, shape, rank, rows):
    """rank_input with `rows` rows in the first dimension."""
    return rank_input(dtype, (rows,) + tuple(shape[1:]), rank)


def check_grouped_allreduce(rank, size):
    pending = []
    for dtype in DTYPES:
        for op in ops_for(dtype):
            tensors = [to_mxnet(rank_input(dtype, s, rank), dtype) for s in SHAPES]
            label = "%s.%s" % (dtype, op.name)
            copies = hvd.grouped_allreduce(tensors, op=op, name="grouped." + label)
            in_place = hvd.grouped_allreduce_(tensors, op=op, name="grouped_." + label)
            assert all(a is b for a, b in zip(in_place, tensors))
            pending.append((dtype, op, copies, tensors))
    for dtype, op, copies, tensors in pending:
        for shape, copy, tensor in zip(SHAPES, copies, tensors):
            want = expected(dtype, op, shape, size)
            label = "%s %s %s" % (dtype, op.name, shape)
            assert_equal(copy, want, dtype, "grouped_allreduce " + label)
            assert_equal(tensor, want, dtype, "grouped_allreduce_ " + label)
    scaled = hvd.grouped_allreduce([mx.nd.full((2,), rank + 1.0), mx.nd.ones((3, 2))],
                                   op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.25)
    total = sum(r + 1.0 for r in range(size))
    np.testing.assert_allclose(scaled[0].asnumpy(), [total / 2] * 2, rtol=1e-6)
    np.testing.assert_allclose(scaled[1].asnumpy(), np.full((3, 2), size / 2), rtol=1e-6)
    # Arrays sharing storage in one group: disjoint slices of one array, and one array
    # twice (its result is unspecified, but the request must complete).
    whole = mx.nd.array(np.arange(4.0) + rank)
    hvd.grouped_allreduce_([whole[0:2], whole[2:4]], op=hvd.Sum, name="grouped_.slices")
    np.testing.assert_array_equal(whole.asnumpy(),
                                  sum(np.arange(4.0) + r for r in range(size)))
    twice = mx.nd.ones((3,))
    copies = hvd.grouped_allreduce([twice, twice], op=hvd.Sum, name="grouped.twice")
    for copy in copies:
        np.testing.assert_array_equal(copy.asnumpy(), [size] * 3)
    hvd.grouped_allreduce_([twice, twice], op=hvd.Sum, name="grouped_.twice")
    twice.wait_to_read()


def check_allgather(rank, size):
    for dtype in DTYPES:
        results = []
        for shape in SHAPES:
            tensor = to_mxnet(rows_input(dtype, shape, rank, rank + 1), dtype)
            results.append(hvd.allgather(tensor, name="allgather.%s.%d" % (dtype, len(shape))))
        grouped = hvd.grouped_allgather(
            [to_mxnet(rows_input(dtype, s, rank, rank + 1), dtype) for s in SHAPES],
            name="grouped_allgather." + dtype)
        for shape, single, group in zip(SHAPES, results, grouped):
            want = np.concatenate([rows_input(dtype, shape, r, r + 1) for r in range(size)])
            assert_equal(single, want, dtype, "allgather %s %s" % (dtype, shape))
            assert_equal(group, want, dtype, "grouped_allgather %s %s" % (dtype, shape))


def check_broadcast(rank, size):
    root = size - 1
    for dtype in DTYPES:
        for shape in SHAPES:
            tensor = to_mxnet(rank_input(dtype, shape, rank), dtype)
            copy = hvd.broadcast(tensor, root, name="broadcast.%s.%d" % (dtype, len(shape)))
            same = hvd.broadcast_(tensor, root, name="broadcast_.%s.%d" % (dtype, len(shape)))
            assert same is tensor
            want = rank_input(dtype, shape, root)
            assert_equal(copy, want, dtype, "broadcast %s %s" % (dtype, shape))
            assert_equal(tensor, want, dtype, "broadcast_ %s %s" % (dtype, shape))
    scalar = hvd.broadcast(mx.np.array(rank + 5.0), root, name="broadcast.scalar")
    assert scalar.shape == () and float(scalar) == root + 5.0, scalar


def alltoall_splits(rank, size):
    """Rows rank `rank` sends to each rank: uneven, some zero."""
    return [(rank + 2 * j) % 3 for j in range(size)]


def check_alltoall(rank, size):
    for dtype in DTYPES:
        for shape in SHAPES:
            def source(r):
                return rows_input(dtype, shape, r, sum(alltoall_splits(r, size)))
            splits = alltoall_splits(rank, size)
            output, received = hvd.alltoall(to_mxnet(source(rank), dtype), splits=splits,
                                            name="alltoall.%s.%d" % (dtype, len(shape)))
            parts = []
            for r in range(size):
                start = sum(alltoall_splits(r, size)[:rank])
                parts.append(source(r)[start:start + alltoall_splits(r, size)[rank]])
            label = "alltoall %s %s" % (dtype, shape)
            assert_equal(output, np.concatenate(parts), dtype, label)
            np.testing.assert_array_equal(
                received.asnumpy(), [alltoall_splits(r, size)[rank] for r in range(size)])
    # Equal parts when no splits are given.
    tensor = mx.nd.array(np.arange(2 * size) + 100 * rank)
    output = hvd.alltoall(tensor, name="alltoall.equal")  # Horovod: no splits given, no tuple
    want = np.concatenate([np.arange(2 * size)[2 * rank:2 * rank + 2] + 100 * r
                           for r in range(size)])
    np.testing.assert_array_equal(output.asnumpy(), want)
    output, received = hvd.alltoall(tensor, splits=[2] * size, name="alltoall.even_splits")
    np.testing.assert_array_equal(output.asnumpy(), want)
    np.testing.assert_array_equal(received.asnumpy(), [2] * size)
    # Rows the set size does not divide: as in Horovod, the first rows % size ranks get one
    # row more (and no tuple comes back).
    rows = 2 * size + 1
    tensor = mx.nd.array(np.arange(rows) + 100 * rank)
    output = hvd.alltoall(tensor, name="alltoall.uneven")
    counts = [rows // size + (1 if j < rows % size else 0) for j in range(size)]
    start = sum(counts[:rank])
    want = np.concatenate([np.arange(rows)[start:start + counts[rank]] + 100 * r
                           for r in range(size)])
    np.testing.assert_array_equal(output.asnumpy(), want)


def scattered(full, rank, size):
    rows = full.shape[0]
    counts = [rows // size + (1 if r < rows % size else 0) for r in range(size)]
    start = sum(counts[:rank])
    return full[start:start + counts[rank]]


def check_reducescatter(rank, size):
    shapes = [(5,), (4, 3), (7, 2, 2)]  # rows not divisible by the set size
    pending = []
    for dtype in DTYPES:
        for op in ops_for(dtype):
            label = "%s.%s" % (dtype, op.name)
            singles = [hvd.reducescatter(to_mxnet(rank_input(dtype, s, rank), dtype), op=op,
                                         name="reducescatter.%s.%d" % (label, len(s)))
                       for s in shapes]
            grouped = hvd.grouped_reducescatter(
                [to_mxnet(rank_input(dtype, s, rank), dtype) for s in shapes], op=op,
                name="grouped_reducescatter." + label)
            pending.append((dtype, op, singles, grouped))
    for dtype, op, singles, grouped in pending:
        for shape, single, group in zip(shapes, singles, grouped):
            want = scattered(expected(dtype, op, shape, size), rank, size)
            label = "%s %s %s" % (dtype, op.name, shape)
            assert_equal(single, want, dtype, "reducescatter " + label)
            assert_equal(group, want, dtype, "grouped_reducescatter " + label)
    base = mx.nd.array(rank_input("float32", (6, 2), rank))
    result = hvd.reducescatter(base, prescale_factor=2.0, postscale_factor=0.5)  # Average
    want = scattered(expected("float32", hvd.Average, (6, 2), size), rank, size)
    np.testing.assert_allclose(result.asnumpy(), want, rtol=1e-6)


def check_process_set(rank, size):
    members = [0, size - 1]
    subset = hvd.add_process_set(members)
    if rank in members:
        set_rank = members.index(rank)
        value = mx.nd.array([rank + 1.0, 1.0])
        summed = hvd.allreduce(value, op=hvd.Sum, process_set=subset)
        np.testing.assert_array_equal(summed.asnumpy(), [sum(m + 1.0 for m in members), 2.0])
        gathered = hvd.allgather(mx.nd.array([rank] * (set_rank + 1)), process_set=subset)
        np.testing.assert_array_equal(gathered.asnumpy(),
                                      [members[0], members[1], members[1]])
        root = hvd.broadcast(mx.nd.array([rank]), root_rank=members[1], process_set=subset)
        np.testing.assert_array_equal(root.asnumpy(), [members[1]])
        output = hvd.alltoall(mx.nd.array([rank, rank]), process_set=subset)
        np.testing.assert_array_equal(output.asnumpy(), members)
        part = hvd.reducescatter(mx.nd.array([1.0, 2.0, 3.0]), op=hvd.Sum, process_set=subset)
        np.testing.assert_array_equal(part.asnumpy(), [2.0, 4.0] if set_rank == 0 else [6.0])
        assert hvd.broadcast_object("from %d" % rank, root_rank=members[1],
                                    process_set=subset) == (
            "from %d" % members[1])
        assert hvd.allgather_object(rank, process_set=subset) == members
        hvd.barrier(process_set=subset)
    hvd.barrier()
    hvd.remove_process_set(subset)


def check_global_roots(rank, size):
    """root_rank on a set is a global rank (Horovod 0.28.1): [1, 2] broadcasts from rank 2
    and from rank 1 (new array, in place, objects)."""
    if size < 3:
        return
    pair = hvd.add_process_set([1, 2])
    if pair.included():
        got = hvd.broadcast(mx.nd.array([10.0 * rank]), root_rank=2, process_set=pair)
        np.testing.assert_array_equal(got.asnumpy(), [20.0])
        in_place = mx.nd.array([10.0 * rank])
        hvd.broadcast_(in_place, root_rank=1, process_set=pair)
        np.testing.assert_array_equal(in_place.asnumpy(), [10.0])
        obj = hvd.broadcast_object({"from": rank}, root_rank=2, process_set=pair)
        assert obj == {"from": 2}, obj
    hvd.barrier()
    hvd.remove_process_set(pair)


def check_objects_and_compression(rank, size):
    obj = hvd.broadcast_object({"rank": rank, "list": list(range(rank + 3))}, root_rank=0)
    assert obj == {"rank": 0, "list": [0, 1, 2]}, obj
    gathered = hvd.allgather_object(("rank", rank, "x" * rank), name="objects")
    assert gathered == [("rank", r, "x" * r) for r in range(size)], gathered
    tensor = mx.nd.array([1.5, -2.25], dtype="float32")
    compressed, context = hvd.Compression.fp16.compress(tensor)
    assert compressed.dtype == np.float16
    summed = hvd.allreduce(compressed, op=hvd.Sum, name="fp16")
    restored = hvd.Compression.fp16.decompress(summed, context)
    assert restored.dtype == np.float32
    np.testing.assert_array_equal(restored.asnumpy(), [1.5 * size, -2.25 * size])
    same, none_context = hvd.Compression.none.compress(tensor)
    assert same is tensor and hvd.Compression.none.decompress(same, none_context) is tensor


def check_join(rank, size):
    # Rank r makes r + 1 allreduces, then joins: the ranks that joined contribute zeros.
    results = [hvd.allreduce(mx.nd.array([rank + 1.0]), op=hvd.Sum, name="uneven.%d" % i)
               for i in range(rank + 1)]
    last = hvd.join()
    assert 0 <= last < size, last
    for i, result in enumerate(results):
        want = sum(r + 1.0 for r in range(size) if r + 1 > i)
        np.testing.assert_array_equal(result.asnumpy(), [want])
    # After join, everything works again.
    again = hvd.allreduce(mx.nd.array([1.0]), op=hvd.Sum)
    np.testing.assert_array_equal(again.asnumpy(), [float(size)])


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    check_allreduce(rank, size)
    check_grouped_allreduce(rank, size)
    check_allgather(rank, size)
    check_broadcast(rank, size)
    check_alltoall(rank, size)
    check_reducescatter(rank, size)
    check_process_set(rank, size)
    check_global_roots(rank, size)
    check_objects_and_compression(rank, size)
    check_join(rank, size)
    hvd.barrier()
    print("rank %d: collective cases passed" % rank, flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
