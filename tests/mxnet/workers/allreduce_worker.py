"""Checks allreduce and allreduce_ for every dtype x op x rank 0-3 on all ranks.

Every rank computes all ranks' inputs (they depend only on the rank), so it can check
its result against numpy. collectives_worker.py runs these checks with the others; run
alone, this prints "rank R: N allreduce cases passed" on success.
"""

import sys

import tutti.mxnet as hvd

import mxnet as mx
import numpy as np

BFLOAT16 = np.dtype([("bfloat16", np.uint16)])
DTYPES = ["uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64", "bool"]
OPS = [hvd.Average, hvd.Sum, hvd.Min, hvd.Max, hvd.Product]
SHAPES = [(7,), (3, 4), (2, 3, 4)]


def rank_input(dtype, shape, rank):
    """Small values whose sums and products are exact in every dtype (int8 included)."""
    index = np.arange(int(np.prod(shape))).reshape(shape)
    if dtype == "bool":
        return (index + rank) % 3 != 0
    if dtype == "uint8":
        return (index * 3 + rank) % 4 + 1
    return (index * 3 + rank) % 7 - 3  # -3..3


def to_mxnet(values, dtype):
    if dtype == "bfloat16":
        return mx.nd.array(values, dtype="float32").astype(BFLOAT16)
    return mx.nd.array(values, dtype=dtype)


def to_numpy(array):
    if np.dtype(array.dtype) == BFLOAT16:
        return array.astype("float32").asnumpy()
    return array.asnumpy()


def expected(dtype, op, shape, size):
    inputs = np.stack([rank_input(dtype, shape, r) for r in range(size)])
    if dtype == "bool":
        if op in (hvd.Sum, hvd.Max):
            return inputs.any(axis=0)
        return inputs.all(axis=0)
    inputs = inputs.astype(np.float64)
    if op == hvd.Sum:
        return inputs.sum(axis=0)
    if op == hvd.Min:
        return inputs.min(axis=0)
    if op == hvd.Max:
        return inputs.max(axis=0)
    if op == hvd.Product:
        return inputs.prod(axis=0)
    if dtype in ("float16", "bfloat16", "float32", "float64"):
        return inputs.sum(axis=0) / size
    return np.trunc((1.0 / size) * inputs.sum(axis=0))  # integers: truncated, as in Horovod


def cases():
    for dtype in DTYPES:
        for op in OPS:
            if dtype == "bool" and op == hvd.Average:
                continue  # undefined; checked by the error tests
            for shape in SHAPES:
                for in_place in (False, True):
                    yield dtype, op, shape, in_place


def check(result, dtype, op, shape, in_place, size):
    want = expected(dtype, op, shape, size)
    got = to_numpy(result)
    label = "%s %s %s %s" % (dtype, op.name, shape, "in place" if in_place else "out of place")
    assert got.shape == tuple(shape), "%s: shape %s" % (label, got.shape)
    if dtype == "bool":
        assert got.dtype == np.bool_, "%s: dtype %s" % (label, got.dtype)
        np.testing.assert_array_equal(got, want, err_msg=label)
    elif dtype in ("float16", "bfloat16"):
        np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2, err_msg=label)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, err_msg=label)


def check_allreduce(rank, size):
    """Returns the number of dtype x op x shape cases checked."""
    # Push every request first and only then read the results: the collectives run
    # asynchronously in MXNet's engine and the core negotiates them by name.
    pending = []
    for dtype, op, shape, in_place in cases():
        name = "%s.%s.%dd.%s" % (dtype, op.name, len(shape), "inplace" if in_place else "copy")
        tensor = to_mxnet(rank_input(dtype, shape, rank), dtype)
        if in_place:
            result = hvd.allreduce_(tensor, op=op, name=name)
            assert result is tensor
        else:
            result = hvd.allreduce(tensor, op=op, name=name)
            assert result is not tensor
        pending.append((tensor, result, dtype, op, shape, in_place))
    for tensor, result, dtype, op, shape, in_place in pending:
        check(result, dtype, op, shape, in_place, size)
        if not in_place:  # the input is left alone
            np.testing.assert_array_equal(to_numpy(tensor), rank_input(dtype, shape, rank))

    # Scale factors, the deprecated average flag, unnamed requests and priorities.
    base = mx.nd.array(rank_input("float32", (4, 5), rank))
    total = expected("float32", hvd.Sum, (4, 5), size)
    scaled = hvd.allreduce(base, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)
    np.testing.assert_allclose(scaled.asnumpy(), total * 1.5, rtol=1e-6)
    summed = hvd.allreduce(base, average=False, priority=5)
    np.testing.assert_allclose(summed.asnumpy(), total, rtol=1e-6)
    averaged = hvd.allreduce(base)
    np.testing.assert_allclose(averaged.asnumpy(), total / size, rtol=1e-6)

    # A slice of a larger array is reduced in place without touching its neighbours.
    matrix = mx.nd.array(np.full((4, 3), rank + 1.0))
    hvd.allreduce_(matrix[1:3], op=hvd.Sum, name="slice")
    want = np.full((4, 3), rank + 1.0)
    want[1:3] = sum(r + 1.0 for r in range(size))
    np.testing.assert_array_equal(matrix.asnumpy(), want)

    # A temporary input that Python drops at once must stay valid until it is reduced.
    dropped = hvd.allreduce(mx.nd.ones((1000,)) * (rank + 1), op=hvd.Sum, name="temporary")
    np.testing.assert_array_equal(dropped.asnumpy(),
                                  np.full(1000, float(sum(range(1, size + 1)))))

    # MXNet's numpy interface: the result has the caller's array type.
    total = float(sum(range(1, size + 1)))
    numpy_style = hvd.allreduce(mx.np.full((2, 2), rank + 1.0), op=hvd.Sum, name="mx.np")
    assert isinstance(numpy_style, mx.np.ndarray), type(numpy_style)
    np.testing.assert_array_equal(numpy_style.asnumpy(), np.full((2, 2), total))

    # Zero-dimensional arrays (MXNet's numpy interface has them) with every op.
    scalars = {op: hvd.allreduce(mx.np.array(rank + 1.0), op=op, name="scalar." + op.name)
               for op in OPS}
    ranks = np.arange(1.0, size + 1)
    for op, want in [(hvd.Average, ranks.mean()), (hvd.Sum, ranks.sum()),
                     (hvd.Min, 1.0), (hvd.Max, float(size)), (hvd.Product, ranks.prod())]:
        assert scalars[op].shape == (), scalars[op].shape
        np.testing.assert_allclose(scalars[op].asnumpy(), want, rtol=1e-6, err_msg=op.name)
    return len(pending)


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    count = check_allreduce(rank, size)
    print("rank %d: %d allreduce cases passed" % (rank, count), flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
