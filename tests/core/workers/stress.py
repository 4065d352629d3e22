"""Stress: every rank submits the same 200 requests of random sizes, collectives and dtypes
(one seed for all ranks), each rank in its own random order and from two threads, all
asynchronously; then checks every result. `stress.py [count]`.

Prints "rank R/N: K cases ok, F failed"; exits 1 on any failure.
"""

import random
import sys
import threading

import numpy as np

import tutti.numpy as hvd
from reference import Checker, make_input, reduce_reference, scatter_rows

KINDS = ["allreduce"] * 5 + ["allgather"] * 2 + ["broadcast", "alltoall"] + ["reducescatter"] * 2
DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "int8"]
OPS = {"allreduce": [hvd.Sum, hvd.Average, hvd.Max, hvd.Min],
       "reducescatter": [hvd.Sum, hvd.Average, hvd.Max]}


def plan(count, size):
    """The requests, identical on every rank: (name, kind, dtype, op, shape per rank, root)."""
    rng = random.Random(1234)
    requests = []
    for i in range(count):
        kind = rng.choice(KINDS)
        dtype = rng.choice(DTYPES if kind != "alltoall" else ["float32", "int64"])
        op = rng.choice(OPS.get(kind, [hvd.Sum]))
        if dtype in ("uint8", "int8") and op == hvd.Average:
            op = hvd.Sum
        # Mostly small tensors, some large (up to ~260k elements).
        columns = rng.choice([1, 3, 17, 128, 1000, 4096])
        rows = rng.randint(1, 64)
        if kind == "allgather":
            shapes = [(rows + r, columns) for r in range(size)]
        elif kind == "alltoall":
            shapes = [(rows * size, columns)] * size
        else:
            shapes = [(rows, columns)] * size
        requests.append(("stress.%d" % i, kind, dtype, op, shapes, rng.randrange(size)))
    return requests


def submit(request, rank, size):
    name, kind, dtype, op, shapes, root = request
    x = make_input(dtype, op, shapes[rank], int(name.split(".")[1]), rank)
    if kind == "allreduce":
        return hvd.allreduce_async(x, op=op, name=name)
    if kind == "allgather":
        return hvd.allgather_async(x, name=name)
    if kind == "broadcast":
        return hvd.broadcast_async(x, root, name=name)
    if kind == "alltoall":
        return hvd.alltoall_async(x, name=name)
    return hvd.reducescatter_async(x, op=op, name=name)


def expected(request, rank, size):
    name, kind, dtype, op, shapes, root = request
    inputs = [make_input(dtype, op, shapes[r], int(name.split(".")[1]), r) for r in range(size)]
    if kind == "allreduce":
        return reduce_reference(dtype, op, inputs)
    if kind == "allgather":
        return np.concatenate(inputs)
    if kind == "broadcast":
        return inputs[root]
    if kind == "alltoall":
        return np.concatenate([np.split(x, size)[rank] for x in inputs])
    total = reduce_reference(dtype, op, inputs)
    offsets = np.cumsum([0] + scatter_rows(shapes[0][0], size))
    return total[offsets[rank]:offsets[rank + 1]]


def main(count):
    hvd.init()
    check = Checker()
    rank, size = check.rank, check.size
    requests = plan(count, size)
    order = list(range(count))
    random.Random(rank).shuffle(order)  # a different order on every rank
    handles = {}

    def submit_all(indices):
        for index in indices:
            handles[index] = submit(requests[index], rank, size)

    threads = [threading.Thread(target=submit_all, args=(order[i::2],)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for index in range(count):
        request = requests[index]
        got = check.run(request[0], hvd.synchronize, handles[index], 120)
        if request[1] == "alltoall" and got is not None:
            got = got[0]
        if got is not None:
            check.equal(request[0], got, expected(request, rank, size))
    hvd.shutdown()
    return check.report()


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
