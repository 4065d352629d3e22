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

import numpy as np

import tutti.numpy as hvd


def say(line):
    """Prints one line with a single write, so lines of different ranks never interleave."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()

try:
    import ml_dtypes

    BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:
    BFLOAT16 = None

DTYPES = ["uint8", "int8", "uint16", "int16", "int32", "int64",
          "float16", "bfloat16", "float32", "float64", "bool"]
OPS = [hvd.Average, hvd.Sum, hvd.Min, hvd.Max, hvd.Product]
SHAPES = [(7,), (3, 5), (2, 3, 4)]
TOLERANCE = {"float16": 1e-3, "bfloat16": 1e-2, "float32": 1e-6, "float64": 1e-12}


def numpy_dtype(name):
    return BFLOAT16 if name == "bfloat16" else np.dtype(name)


def is_unsigned(name):
    return name.startswith("uint")


def is_float(name):
    return name in TOLERANCE


def make_input(name, op, shape, case, rank):
    """Small values whose sums and products are exact in every dtype, for up to 3 ranks."""
    rng = np.random.default_rng([case, rank])
    if name == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if op == hvd.Product:
        values = rng.integers(1 if is_unsigned(name) else -2, 3, size=shape)
    else:
        values = rng.integers(0 if is_unsigned(name) else -20, 20, size=shape)
    if is_float(name):
        values = values / (2.0 if op == hvd.Product else 4.0)
    return np.asarray(values).astype(numpy_dtype(name))


def round_half_away(values):
    return np.sign(values) * np.floor(np.abs(values) + 0.5)


def reference(name, op, inputs, prescale=1.0, postscale=1.0):
    size = len(inputs)
    if name == "bool":
        stack = np.stack(inputs)
        either = op in (hvd.Sum, hvd.Max)
        return (stack.any(axis=0) if either else stack.all(axis=0)).astype(np.bool_)
    stack = np.stack([x.astype(np.float64) for x in inputs])
    if prescale != 1.0:
        stack = stack * prescale
        if not is_float(name):
            stack = round_half_away(stack)
    if op in (hvd.Sum, hvd.Average):
        result = stack.sum(axis=0)
    elif op == hvd.Min:
        result = stack.min(axis=0)
    elif op == hvd.Max:
        result = stack.max(axis=0)
    else:
        result = stack.prod(axis=0)
    divisor = size if op == hvd.Average else 1
    if divisor != 1 or postscale != 1.0:
        result = result * postscale / divisor
        if not is_float(name):
            result = round_half_away(result)
    return result.astype(numpy_dtype(name))


def matches(name, got, expected):
    if got.dtype != expected.dtype or got.shape != expected.shape:
        return False
    if is_float(name):
        tol = TOLERANCE[name]
        return np.allclose(got.astype(np.float64), expected.astype(np.float64), rtol=tol, atol=tol)
    return np.array_equal(got, expected)


class Checker:
    def __init__(self):
        self.rank, self.size = hvd.rank(), hvd.size()
        self.passed = 0
        self.failures = []

    def fail(self, label, detail):
        self.failures.append("%s: %s" % (label, detail))

    def allreduce(self, label, name, op, shape, case, prescale=1.0, postscale=1.0):
        inputs = [make_input(name, op, shape, case, r) for r in range(self.size)]
        mine = inputs[self.rank]
        expected = reference(name, op, inputs, prescale, postscale)
        kwargs = dict(op=op, prescale_factor=prescale, postscale_factor=postscale)
        original = mine.copy()
        try:
            got = hvd.allreduce(mine, name=label, **kwargs)
        except hvd.TuttiError as exc:
            return self.fail(label, "%s: %s" % (type(exc).__name__, exc))
        if not np.array_equal(mine, original):
            return self.fail(label, "the input array was modified by the out-of-place call")
        if not matches(name, got, expected):
            return self.fail(label, "got %r, expected %r" % (got, expected))
        in_place = mine.copy()
        returned = hvd.allreduce_(in_place, name=label + ".inplace", **kwargs)
        if returned is not in_place or not matches(name, in_place, expected):
            return self.fail(label, "in place: got %r, expected %r" % (in_place, expected))
        self.passed += 1

    def expect_error(self, label, error, function):
        try:
            function()
        except error as exc:
            self.passed += 1
            return str(exc)
        except Exception as exc:
            self.fail(label, "expected %s, got %s: %s" % (error.__name__, type(exc).__name__, exc))
        else:
            self.fail(label, "expected %s, but the call succeeded" % error.__name__)


def main():
    hvd.init()
    check = Checker()
    dtypes = [d for d in DTYPES if d != "bfloat16" or BFLOAT16 is not None]
    case = 0
    for name in dtypes:
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
    # Scale factors: prescale is applied to each input, postscale to the result.
    for name in ("float16", "float32", "float64", "int32", "int64", "uint8"):
        check.allreduce("scale.sum.%s" % name, name, hvd.Sum, (6,), 2000, 3.0, 0.5)
        check.allreduce("scale.avg.%s" % name, name, hvd.Average, (6,), 2001, 1.0, 2.0)
    if BFLOAT16 is not None:
        check.allreduce("scale.sum.bfloat16", "bfloat16", hvd.Sum, (6,), 2002, 3.0, 0.5)
    hvd.shutdown()
    for failure in check.failures:
        say("rank %d: FAIL %s" % (check.rank, failure))
    say("rank %d/%d: %d cases ok, %d failed" % (
        check.rank, check.size, check.passed, len(check.failures)))
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
