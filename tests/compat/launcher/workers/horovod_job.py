"""A Horovod-style job: init, an allreduce, and a report of what the launcher set.

Prints one line per rank:
  rank R/S cross=C/CS sum=X store=ADDR:PORT cycle=... autotune=... ib_disable=...
"""

import os

import numpy

import tutti.numpy as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()
assert int(os.environ.get("HOROVOD_RANK", rank)) == rank  # Horovod's names are set too
total = hvd.allreduce(numpy.full(16, rank + 1, dtype=numpy.float32), op=hvd.Sum)
assert numpy.all(total == size * (size + 1) / 2), (rank, total[:4])
env = os.environ.get
print("rank %d/%d cross=%d/%d sum=%g store=%s:%s cycle=%s autotune=%s ib_disable=%s" % (
    rank, size, hvd.cross_rank(), hvd.cross_size(), total[0],
    env("TUTTI_GLOO_RENDEZVOUS_ADDR", "-"), env("TUTTI_GLOO_RENDEZVOUS_PORT", "-"),
    env("TUTTI_CYCLE_TIME", "-"), env("TUTTI_AUTOTUNE", "-"), env("NCCL_IB_DISABLE", "-")),
    flush=True)
hvd.shutdown()
