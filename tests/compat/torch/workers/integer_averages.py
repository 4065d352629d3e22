"""Horovod 0.28.1's exact averages and scale factors: integers scaled in float64 on each
rank and truncated toward zero, float16 scaled in float32, with the last rank joined (it
contributes zeros; Average still divides by the full size). Run with the response cache
on and off. Prints one summary line per rank; exit code 1 on any failure."""

import sys

import numpy as np
import torch

import tutti.torch as hvd

failures = []


def horovod_scale(values, factor, dtype):
    """What Horovod's ScaleBuffer gives: float64 then truncation for integers, float32 for
    float16 and float32."""
    if dtype.is_floating_point and dtype != torch.float64:
        return (np.float32(factor) * values.astype(np.float32))
    scaled = np.float64(factor) * values.astype(np.float64)
    return np.trunc(scaled) if not dtype.is_floating_point else scaled


def expected(inputs, dtype, op, prescale, postscale, size):
    scaled = [horovod_scale(x, prescale, dtype) if prescale != 1.0 else x for x in inputs]
    total = np.sum(np.stack(scaled), axis=0)
    factor = postscale / size if op == hvd.Average else postscale
    result = horovod_scale(total, factor, dtype) if factor != 1.0 else total
    return torch.from_numpy(np.asarray(result)).to(dtype)


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    base = np.array([-3, 3, 5, -7, 9, -1], dtype=np.float64)
    active = list(range(size - 1))  # the last rank joins at once
    cases = [(torch.int32, hvd.Average, 1.0, 1.0), (torch.int64, hvd.Average, 1.0, 1.0),
             (torch.int8, hvd.Average, 1.0, 1.0), (torch.uint8, hvd.Average, 1.0, 1.0),
             (torch.int32, hvd.Sum, 0.5, 1.0), (torch.int32, hvd.Sum, 1.0, 0.3),
             (torch.int64, hvd.Average, 0.7, 1.9), (torch.float16, hvd.Average, 1.0, 0.1),
             (torch.float32, hvd.Sum, 1.0, 0.1)]
    checked = 0
    if rank in active:
        for repeat in range(3):  # repeats: the response cache serves the later rounds
            for i, (dtype, op, pre, post) in enumerate(cases):
                values = np.abs(base) if dtype == torch.uint8 else base
                inputs = [values * (r + 1) for r in active]
                got = hvd.allreduce(torch.from_numpy(inputs[rank]).to(dtype), op=op,
                                    prescale_factor=pre, postscale_factor=post,
                                    name="case.%d" % i)
                want = expected(inputs, dtype, op, pre, post, size)
                if not torch.equal(got, want):
                    failures.append("%s %s pre %s post %s round %d: got %s, Horovod gives %s"
                                    % (dtype, op.name, pre, post, repeat, got.tolist(),
                                       want.tolist()))
                checked += 1
        if size == 2:  # the case: int32 [-3, 3, 5, -7] over 2 ranks, one joined
            got = hvd.allreduce(torch.tensor([-3, 3, 5, -7], dtype=torch.int32))
            if got.tolist() != [-1, 1, 2, -3]:
                failures.append("issue example: got %s" % got.tolist())
            checked += 1
    hvd.join()
    for failure in failures:
        print("rank %d: FAIL %s" % (rank, failure), flush=True)
    print("rank %d/%d: %d averages checked, %d failures" % (rank, size, checked, len(failures)),
          flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
