"""Allreduce through the core under whichever controller launched this process."""

import numpy

import tutti.numpy as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()
total = hvd.allreduce(numpy.full(1000, rank + 1, dtype=numpy.float32), op=hvd.Sum)
expected = size * (size + 1) / 2
assert numpy.all(total == expected), (rank, total[:4], expected)
print("rank %d/%d controller=%s local=%d/%d cross=%d/%d sum=%g" % (
    rank, size, hvd.controller(), hvd.local_rank(), hvd.local_size(), hvd.cross_rank(),
    hvd.cross_size(), total[0]), flush=True)
hvd.shutdown()
