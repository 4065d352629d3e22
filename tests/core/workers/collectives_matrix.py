"""Every collective but allreduce (see allreduce_matrix.py) x every dtype x 1-3 dims, and
every reduction for reducescatter, checked on every rank against numpy references:
allgather (first dimensions differ per rank, one rank sends none), grouped allgather,
broadcast from every root (out of place and in place), alltoall (equal and explicit splits,
some empty), reducescatter (uneven rows), grouped reducescatter, grouped allreduce (out of
place and in place), barrier, empty tensors and parts, the *_async forms with poll(), and
fused allreduces of tensors large enough for the pipelined shared-memory path.

Prints "rank R/N: K cases ok, F failed" and a FAIL line per failure; exits 1 on any.
"""

import sys

import numpy as np

import tutti.numpy as hvd
from reference import (
    DTYPES,
    OPS,
    SHAPES,
    Checker,
    make_input,
    reduce_reference,
    scatter_rows,
)


def with_rows(shape, rows):
    return (rows,) + tuple(shape[1:])


class Matrix(Checker):
    def inputs(self, dtype, shape_of_rank, case, op=hvd.Sum):
        return [make_input(dtype, op, shape_of_rank(r), case, r) for r in range(self.size)]

    def allgather(self, label, dtype, shape, case):
        # Rank r sends r more rows than rank 0; for 1-d shapes rank 0 sends none.
        base = shape[0] if len(shape) > 1 else 0
        inputs = self.inputs(dtype, lambda r: with_rows(shape, base + r), case)
        got = self.run(label, hvd.allgather, inputs[self.rank], name=label)
        self.equal(label, got, np.concatenate(inputs))

    def grouped_allgather(self, label, dtype, shape, case):
        first = self.inputs(dtype, lambda r: with_rows(shape, r + 1), case)
        second = self.inputs(dtype, lambda r: (self.size - r, 2), case + 50000)
        got = self.run(label, hvd.grouped_allgather, [first[self.rank], second[self.rank]],
                       name=label)
        if got is None:
            return
        if len(got) != 2:
            return self.fail(label, "expected 2 results, got %d" % len(got))
        self.equal(label + "[0]", got[0], np.concatenate(first))
        self.equal(label + "[1]", got[1], np.concatenate(second))

    def broadcast(self, label, dtype, shape, case):
        inputs = self.inputs(dtype, lambda r: shape, case)
        for root in range(self.size):
            mine = inputs[self.rank].copy()
            got = self.run(label, hvd.broadcast, mine, root, name="%s.root%d" % (label, root))
            self.equal("%s.root%d" % (label, root), got, inputs[root])
            if not np.array_equal(mine, inputs[self.rank]):
                self.fail(label, "broadcast changed its input")
            in_place = inputs[self.rank].copy()
            returned = self.run(label, hvd.broadcast_, in_place, root_rank=root,
                                name="%s.root%d.inplace" % (label, root))
            if returned is not None and returned is not in_place:
                self.fail(label, "broadcast_ did not return its argument")
            self.equal("%s.root%d.inplace" % (label, root), in_place, inputs[root])

    def alltoall(self, label, dtype, shape, case, explicit):
        n = self.size
        if explicit:  # rank i sends (i + j) % 3 rows to rank j: some parts are empty
            splits = [[(i + j) % 3 for j in range(n)] for i in range(n)]
        else:
            splits = [[shape[0]] * n for _ in range(n)]
        inputs = self.inputs(dtype, lambda r: with_rows(shape, sum(splits[r])), case)
        parts = [np.split(x, np.cumsum(s)[:-1]) for x, s in zip(inputs, splits)]
        expected = np.concatenate([parts[i][self.rank] for i in range(n)])
        expected_splits = np.array([splits[i][self.rank] for i in range(n)], np.int32)
        result = self.run(label, hvd.alltoall, inputs[self.rank],
                          splits=splits[self.rank] if explicit else None, name=label)
        if result is None:
            return
        output, received = result
        self.equal(label, output, expected)
        self.equal(label + ".received_splits", received, expected_splits)

    def reducescatter(self, label, dtype, op, shape, case):
        rows = 2 * self.size + 1  # never divisible: the first rank gets one row more
        inputs = self.inputs(dtype, lambda r: with_rows(shape, rows), case, op)
        total = reduce_reference(dtype, op, inputs)
        offsets = np.cumsum([0] + scatter_rows(rows, self.size))
        expected = total[offsets[self.rank]:offsets[self.rank + 1]]
        got = self.run(label, hvd.reducescatter, inputs[self.rank], op=op, name=label)
        self.equal(label, got, expected)

    def grouped_reducescatter(self, label, dtype, shape, case):
        op = hvd.Sum
        shapes = [with_rows(shape, self.size + 1), (self.size * 2, 3)]
        inputs = [self.inputs(dtype, lambda r, s=s: s, case + i, op) for i, s in enumerate(shapes)]
        got = self.run(label, hvd.grouped_reducescatter, [x[self.rank] for x in inputs],
                       op=op, name=label)
        if got is None:
            return
        for i, (shape_i, per_rank) in enumerate(zip(shapes, inputs)):
            total = reduce_reference(dtype, op, per_rank)
            offsets = np.cumsum([0] + scatter_rows(shape_i[0], self.size))
            self.equal("%s[%d]" % (label, i), got[i],
                       total[offsets[self.rank]:offsets[self.rank + 1]])

    def grouped_allreduce(self, label, dtype, op, shape, case):
        shapes = [shape, (4,), (2, 2)]
        inputs = [self.inputs(dtype, lambda r, s=s: s, case + i, op) for i, s in enumerate(shapes)]
        expected = [reduce_reference(dtype, op, per_rank) for per_rank in inputs]
        mine = [x[self.rank] for x in inputs]
        got = self.run(label, hvd.grouped_allreduce, mine, op=op, name=label)
        if got is not None:
            for i in range(len(shapes)):
                self.equal("%s[%d]" % (label, i), got[i], expected[i])
        in_place = [x.copy() for x in mine]
        returned = self.run(label, hvd.grouped_allreduce_, in_place, op=op,
                            name=label + ".inplace")
        if returned is not None and any(a is not b for a, b in zip(returned, in_place)):
            self.fail(label, "grouped_allreduce_ did not return its arguments")
        for i in range(len(shapes)):
            self.equal("%s.inplace[%d]" % (label, i), in_place[i], expected[i])

    def edges(self, case):
        """Empty parts: one row scattered over all ranks, nothing gathered, nothing sent."""
        n = self.size
        inputs = self.inputs("float64", lambda r: (1, 3), case, hvd.Sum)
        got = self.run("edge.reducescatter", hvd.reducescatter, inputs[self.rank], op=hvd.Sum,
                       name="edge.reducescatter")
        total = reduce_reference("float64", hvd.Sum, inputs)
        self.equal("edge.reducescatter", got, total if self.rank == 0 else total[:0])
        empty = np.zeros((0, 3), np.int32)
        self.equal("edge.allgather", self.run("edge.allgather", hvd.allgather, empty,
                                              name="edge.allgather"), empty)
        self.equal("edge.broadcast", self.run("edge.broadcast", hvd.broadcast, empty, 0,
                                              name="edge.broadcast"), empty)
        result = self.run("edge.alltoall", hvd.alltoall, empty, splits=[0] * n,
                          name="edge.alltoall")
        if result is not None:
            self.equal("edge.alltoall", result[0], empty)
            self.equal("edge.alltoall.splits", result[1], np.zeros(n, np.int32))

    def fused_large(self, case):
        """Tensors large enough for the pipelined shared-memory path (chunks cross tensor
        boundaries), submitted together so that they fuse: into new arrays and in place, Sum
        and Average, with a prescale factor, and one array twice in a group (overlapping
        memory, which takes the packed path)."""
        shapes = [(3001,), (0,), (40, 257), (1,), (70001,)]
        for op, prescale in ((hvd.Sum, 1.0), (hvd.Average, 1.0), (hvd.Sum, 0.5)):
            label = "fused.%s.pre%g" % (op.name, prescale)
            inputs = [self.inputs("float32", lambda r, s=s: s, case + i, op)
                      for i, s in enumerate(shapes)]
            expected = [reduce_reference("float32", op, per_rank, prescale)
                        for per_rank in inputs]
            mine = [x[self.rank] for x in inputs]
            handles = [hvd.allreduce_async(x, op=op, prescale_factor=prescale,
                                           name="%s.%d" % (label, i)) for i, x in enumerate(mine)]
            for i, handle in enumerate(handles):
                self.equal("%s[%d]" % (label, i), hvd.synchronize(handle, timeout=60), expected[i])
            in_place = [x.copy() for x in mine]
            handles = [hvd.allreduce_async_(x, op=op, prescale_factor=prescale,
                                            name="%s.inplace.%d" % (label, i))
                       for i, x in enumerate(in_place)]
            for handle in handles:
                hvd.synchronize(handle, timeout=60)
            for i in range(len(shapes)):
                self.equal("%s.inplace[%d]" % (label, i), in_place[i], expected[i])
        big = self.inputs("float32", lambda r: (9000,), case + 50, hvd.Sum)
        twice = self.run("fused.twice", hvd.grouped_allreduce, [big[self.rank]] * 2, op=hvd.Sum,
                         name="fused.twice")
        if twice is not None:
            total = reduce_reference("float32", hvd.Sum, big)
            self.equal("fused.twice[0]", twice[0], total)
            self.equal("fused.twice[1]", twice[1], total)

    def asynchronous(self, case):
        """Several collectives in flight at once, completed in reverse order."""
        x = make_input("float32", hvd.Sum, (5, 2), case, self.rank)
        handles = [
            hvd.allreduce_async(x, op=hvd.Sum, name="async.allreduce"),
            hvd.allgather_async(x, name="async.allgather"),
            hvd.broadcast_async(x, root_rank=self.size - 1, name="async.broadcast"),
            hvd.reducescatter_async(x, op=hvd.Max, name="async.reducescatter"),
            hvd.alltoall_async(np.repeat(x, self.size, axis=0), name="async.alltoall"),
            hvd.grouped_allreduce_async([x, x], op=hvd.Min, name="async.grouped"),
        ]
        results = [hvd.synchronize(h, timeout=60) for h in reversed(handles)]
        if all(hvd.poll(h) for h in handles) and len(results) == len(handles):
            self.passed += 1
        else:
            self.fail("async", "not every handle reports completion")


def main():
    hvd.init()
    check = Matrix()
    case = 0
    for dtype in DTYPES:
        for shape in SHAPES:
            case += 100
            label = "%s.%dd" % (dtype, len(shape))
            check.allgather(label + ".allgather", dtype, shape, case + 1)
            check.grouped_allgather(label + ".grouped_allgather", dtype, shape, case + 2)
            check.broadcast(label + ".broadcast", dtype, shape, case + 3)
            check.alltoall(label + ".alltoall.equal", dtype, shape, case + 4, explicit=False)
            check.alltoall(label + ".alltoall.splits", dtype, shape, case + 5, explicit=True)
            check.grouped_reducescatter(label + ".grouped_reducescatter", dtype, shape,
                                        case + 6)
            for op in OPS:
                op_label = "%s.%s" % (label, op.name)
                if dtype == "bool" and op == hvd.Average:
                    continue  # refused: see the errors worker
                check.reducescatter(op_label + ".reducescatter", dtype, op, shape,
                                    case + 10 + int(op))
                check.grouped_allreduce(op_label + ".grouped_allreduce", dtype, op, shape,
                                        case + 20 + int(op) * 3)
            check.run(label + ".barrier", hvd.barrier)
    check.edges(case + 1)
    check.asynchronous(case + 2)
    check.fused_large(case + 3)
    hvd.shutdown()
    return check.report()


if __name__ == "__main__":
    sys.exit(main())
