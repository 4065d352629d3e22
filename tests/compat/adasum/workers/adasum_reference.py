"""Adasum written from its definition in float64 numpy, independently of tutti: the inputs
every rank uses and the result every rank must get.

Pairwise combination of two vectors a, b (one tensor each):
    (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b,   a coefficient of 1 when |x|^2 < 1e-8;
applied to blocks of ranks as Horovod does: at distance d = 1, 2, 4, ... the result of ranks
[b, b + d) is combined with that of [b + d, b + 2d). Each tensor is combined on its own.
"""

import numpy as np


def combine(a, b):
    dot, aa, bb = float(a @ b), float(a @ a), float(b @ b)
    ca = 1.0 - dot / aa * 0.5 if aa >= 1e-8 else 1.0
    cb = 1.0 - dot / bb * 0.5 if bb >= 1e-8 else 1.0
    return ca * a + cb * b


def adasum(per_rank):
    """per_rank[r]: rank r's tensor (any shape); returns the float64 Adasum of all ranks."""
    vectors = [np.asarray(x, dtype=np.float64).ravel() for x in per_rank]
    distance = 1
    while distance < len(vectors):
        for block in range(0, len(vectors), 2 * distance):
            vectors[block] = combine(vectors[block], vectors[block + distance])
        distance *= 2
    return vectors[0].reshape(np.shape(per_rank[0]))


def tensor(rank, shape, dtype, seed):
    """Rank `rank`'s input: normal values, different per rank, seed and shape."""
    rng = np.random.default_rng([seed, rank])
    return rng.standard_normal(shape).astype(dtype)


# Error allowed relative to the largest magnitude of the reference: the reduction rounds to
# the dtype at every combination step.
TOLERANCE = {np.float16: 1e-2, np.float32: 1e-5, np.float64: 1e-12}


def check(result, per_rank, what):
    """Raises AssertionError naming `what` unless `result` matches the reference."""
    expected = adasum(per_rank)
    result = np.asarray(result)
    dtype = np.asarray(per_rank[0]).dtype.type
    scale = max(float(np.max(np.abs(expected))), 1e-30) if expected.size else 1.0
    error = float(np.max(np.abs(result.astype(np.float64) - expected))) if expected.size else 0.0
    if result.shape != expected.shape or error > TOLERANCE[dtype] * scale:
        raise AssertionError("%s: max error %g (scale %g, dtype %s, shape %s vs %s)"
                             % (what, error, scale, np.dtype(dtype).name, result.shape,
                                expected.shape))
