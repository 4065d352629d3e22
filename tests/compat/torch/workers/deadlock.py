"""Ranks that diverge (each blocked on a request the others never submit) must end in an
error naming the tensors and the ranks, not in an endless wait. Run with a short
TUTTI_STALL_CHECK_TIME_SECONDS. Rank 0 waits on 'only.rank0', the others on 'only.others';
every rank must get a HorovodInternalError (a RuntimeError) that names both tensors and
says "deadlock", and the job must keep working afterwards."""

import sys

import torch

import tutti.torch as hvd


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    name = "only.rank0" if rank == 0 else "only.others"
    failures = []
    try:
        hvd.allreduce(torch.ones(2), name=name)
        failures.append("the divergent allreduce returned")
    except hvd.HorovodInternalError as exc:
        message = str(exc)
        for part in ("deadlock", "'only.rank0'", "'only.others'", "missing rank"):
            if part not in message:
                failures.append("message lacks %r: %s" % (part, message))
    got = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after")
    if not torch.equal(got, torch.full((2,), float(size))):
        failures.append("the job does not work after the deadlock: %s" % got.tolist())
    for failure in failures:
        print("rank %d: FAIL %s" % (rank, failure), flush=True)
    print("rank %d/%d: %d failures" % (rank, size, len(failures)), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
