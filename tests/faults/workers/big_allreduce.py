"""One in-place float32 allreduce of a single buffer of BYTES (`big_allreduce.py BYTES`;
the suite uses 2 GiB + 16 B: 2^29 + 4 elements, one more group of four than fits in 2^31).

Rank r fills its buffer with r + 1, and the first and last 16 elements with a rank-dependent
pattern, so every rank can check the whole sum. Memory per rank: the buffer plus Gloo's two
scratch inboxes of one piece (256 MiB each). Prints "rank R: ok BYTES bytes in S s".
"""

import sys
import time

import numpy as np

import tutti.numpy as hvd


def expected_edge(size):
    # sum over ranks of (r + 1) * (i + 1) for i in 0..15
    total = sum(r + 1 for r in range(size))
    return (np.arange(1, 17, dtype=np.int64) * total).astype(np.float32)


def main(nbytes):
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    count = nbytes // 4
    data = np.full(count, rank + 1, dtype=np.float32)
    edge = (np.arange(1, 17, dtype=np.int64) * (rank + 1)).astype(np.float32)
    data[:16] = edge
    data[-16:] = edge
    started = time.monotonic()
    hvd.allreduce_(data, op=hvd.Sum, name="big")
    seconds = time.monotonic() - started
    want = np.float32(sum(r + 1 for r in range(size)))
    assert np.array_equal(data[:16], expected_edge(size)), data[:16]
    assert np.array_equal(data[-16:], expected_edge(size)), data[-16:]
    step = 16 << 20
    for start in range(16, count - 16, step):
        part = data[start:min(start + step, count - 16)]
        bad = np.flatnonzero(part != want)
        assert bad.size == 0, "byte %d is %d, not %d" % (start + bad[0], part[bad[0]], want)
    print("rank %d: ok %d bytes in %.1f s" % (rank, nbytes, seconds), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]))
