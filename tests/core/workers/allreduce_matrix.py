"""Allreduce of every dtype x reduction x shape (1-3 dims), plus scalars, empty arrays and
scale factors, checked on every rank against a numpy reference.

Every rank can compute every other rank's input (seeded by case and rank), so each rank
checks the full result itself. Prints one summary line per rank; exits 1 on any mismatch.
With --torch-first, torch is imported before tutti.
"""

import sys

if "--torch-first" in sys.argv:
    # torch exports its own, newer Gloo; with TORCH_USE_RTLD_GLOBAL=1 its symbols are global
    # before the core (which links the system's Gloo) is loaded.
    import torch  # noqa: F401

import numpy as np  # noqa: E402

import tutti.numpy as hvd  # noqa: E402
from reference import (  # noqa: E402  (after the optional torch import on purpose)
    BFLOAT16,
    DTYPES,
    OPS,
    SHAPES,
    Checker,
    make_input,
    matches,
    reduce_reference,
)


class AllreduceChecker(Checker):
    """Checks one allreduce out of place (input untouched) and in place."""

    def allreduce(self, label, name, op, shape, case, prescale=1.0, postscale=1.0):
        inputs = [make_input(name, op, shape, case, r) for r in range(self.size)]
        mine = inputs[self.rank]
        expected = reduce_reference(name, op, inputs, prescale, postscale)
        kwargs = dict(op=op, prescale_factor=prescale, postscale_factor=postscale)
        original = mine.copy()
        try:
            got = hvd.allreduce(mine, name=label, **kwargs)
        except hvd.TuttiError as exc:
            return self.fail(label, "%s: %s" % (type(exc).__name__, exc))
        if not np.array_equal(mine, original):
            return self.fail(label, "the input array was modified by the out-of-place call")
        if not matches(got, expected):
            return self.fail(label, "got %r, expected %r" % (got, expected))
        in_place = mine.copy()
        returned = hvd.allreduce_(in_place, name=label + ".inplace", **kwargs)
        if returned is not in_place or not matches(in_place, expected):
            return self.fail(label, "in place: got %r, expected %r" % (in_place, expected))
        self.passed += 1


def main():
    hvd.init()
    check = AllreduceChecker()
    case = 0
    for name in DTYPES:
        for op in OPS:
            for shape in SHAPES:
                case += 1
                label = "%s.%s.%dd" % (name, op.name, len(shape))
                if name == "bool" and op == hvd.Average:
                    message = check.expect_error(
                        label, hvd.InvalidArgumentError,
                        lambda: hvd.allreduce(np.ones(shape, np.bool_), op=op, name=label))
                    if message is not None and "bool" not in message:
                        check.fail(label, "the message does not name the dtype: %s" % message)
                    continue
                check.allreduce(label, name, op, shape, case)
    # Scalars and empty arrays.
    for name in ("float32", "int64"):
        check.allreduce("scalar.%s" % name, name, hvd.Sum, (), 1000)
        check.allreduce("empty.%s" % name, name, hvd.Sum, (0,), 1001)
        check.allreduce("empty3d.%s" % name, name, hvd.Max, (2, 0, 3), 1002)
    # A read-only input reduces into a new array; in place it is refused.
    frozen = np.full(5, float(hvd.rank() + 1), np.float32)
    frozen.flags.writeable = False
    total = hvd.size() * (hvd.size() + 1) / 2
    check.equal("readonly", check.run("readonly", hvd.allreduce, frozen, op=hvd.Sum,
                                      name="readonly"), np.full(5, total, np.float32))
    message = check.expect_error("readonly.inplace", hvd.InvalidArgumentError,
                                 lambda: hvd.allreduce_(frozen, name="readonly.inplace"))
    if message is not None and "writeable" not in message:
        check.fail("readonly.inplace", "the message does not say why: %s" % message)
    strided = np.ones((4, 4), np.float32)[:, ::2]
    message = check.expect_error("strided.inplace", hvd.InvalidArgumentError,
                                 lambda: hvd.allreduce_(strided, name="strided.inplace"))
    if message is not None and "contiguous" not in message:
        check.fail("strided.inplace", "the message does not say why: %s" % message)
    # Scale factors: prescale is applied to each input, postscale to the result.
    for name in ("float16", "float32", "float64", "int32", "int64", "uint8"):
        check.allreduce("scale.sum.%s" % name, name, hvd.Sum, (6,), 2000, 3.0, 0.5)
        check.allreduce("scale.avg.%s" % name, name, hvd.Average, (6,), 2001, 1.0, 2.0)
    if BFLOAT16 is not None:
        check.allreduce("scale.sum.bfloat16", "bfloat16", hvd.Sum, (6,), 2002, 3.0, 0.5)
    hvd.shutdown()
    return check.report()


if __name__ == "__main__":
    sys.exit(main())
