"""Smallest end-to-end run of tutti.torch: a few allreduces checked on every rank.

    mpirun -np 2 python frameworks/torch/examples/allreduce_smoke.py
    tuttirun -np 2 python frameworks/torch/examples/allreduce_smoke.py
"""

import sys

import torch

import tutti.torch as hvd


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    mine = torch.full((4,), float(rank + 1))
    total = float(sum(range(1, size + 1)))

    summed = hvd.allreduce(mine, op=hvd.Sum, name="smoke.sum")
    averaged = hvd.allreduce(mine, name="smoke.average")  # Average is the default
    in_place = mine.clone()
    handle = hvd.allreduce_async_(in_place, op=hvd.Max, name="smoke.max")
    hvd.synchronize(handle)

    ok = (
        torch.equal(summed, torch.full((4,), total))
        and torch.allclose(averaged, torch.full((4,), total / size))
        and torch.equal(in_place, torch.full((4,), float(size)))
    )
    print("rank %d/%d (%s): sum %s, average %s, max %s: %s" % (
        rank, size, "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else "local",
        summed[0].item(), averaged[0].item(), in_place[0].item(), "ok" if ok else "WRONG"),
        flush=True)
    hvd.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
