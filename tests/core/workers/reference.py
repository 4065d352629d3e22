"""What the core workers share: dtypes, inputs every rank can recompute for every other
rank, numpy references of the reductions, and a checker that collects failures.

Inputs are seeded by (case, rank), so each rank knows every rank's input and checks the
whole result of a collective itself.
"""

import sys

import numpy as np

import tutti.numpy as hvd

try:
    import ml_dtypes

    BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:
    BFLOAT16 = None

ALL_DTYPES = ["uint8", "int8", "uint16", "int16", "int32", "int64",
              "float16", "bfloat16", "float32", "float64", "bool"]
DTYPES = [d for d in ALL_DTYPES if d != "bfloat16" or BFLOAT16 is not None]
OPS = [hvd.Average, hvd.Sum, hvd.Min, hvd.Max, hvd.Product]
SHAPES = [(7,), (3, 5), (2, 3, 4)]
TOLERANCE = {"float16": 1e-3, "bfloat16": 1e-2, "float32": 1e-6, "float64": 1e-12}


def say(line):
    """Prints one line with a single write, so lines of different ranks never interleave."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


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


def truncate(values):
    """Integers are scaled in float64 and truncated toward zero, as in Horovod 0.28.1."""
    return np.trunc(values)


def reduce_reference(name, op, inputs, prescale=1.0, postscale=1.0, divisor=None):
    """The reduction of `inputs` (one array per rank) as the core defines it. Average divides
    by `divisor`, by default the number of inputs."""
    if name == "bool":
        stack = np.stack(inputs)
        either = op in (hvd.Sum, hvd.Max)
        return (stack.any(axis=0) if either else stack.all(axis=0)).astype(np.bool_)
    stack = np.stack([x.astype(np.float64) for x in inputs])
    if prescale != 1.0:
        stack = prescale * stack
        if not is_float(name):
            stack = truncate(stack)
    if op in (hvd.Sum, hvd.Average):
        result = stack.sum(axis=0)
    elif op == hvd.Min:
        result = stack.min(axis=0)
    elif op == hvd.Max:
        result = stack.max(axis=0)
    else:
        result = stack.prod(axis=0)
    if op == hvd.Average:
        divisor = len(inputs) if divisor is None else divisor
    else:
        divisor = 1
    if divisor != 1 or postscale != 1.0:
        result = (postscale / divisor) * result
        if not is_float(name):
            result = truncate(result)
    return result.astype(numpy_dtype(name))


def scatter_rows(rows, parts):
    """Rows of each rank's part in reducescatter: the first rows % parts ranks get one more."""
    return [rows // parts + (1 if i < rows % parts else 0) for i in range(parts)]


def dtype_name(array):
    return "bfloat16" if array.dtype == BFLOAT16 else array.dtype.name


def matches(got, expected):
    if not isinstance(got, np.ndarray):
        return False
    if got.dtype != expected.dtype or got.shape != expected.shape:
        return False
    name = dtype_name(expected)
    if is_float(name):
        tol = TOLERANCE[name]
        return np.allclose(got.astype(np.float64), expected.astype(np.float64), rtol=tol,
                           atol=tol)
    return np.array_equal(got, expected)


class Checker:
    """Counts passed checks and collects failures; report() prints them and the summary."""

    def __init__(self):
        self.rank, self.size = hvd.rank(), hvd.size()
        self.passed = 0
        self.failures = []

    def fail(self, label, why):
        self.failures.append("%s: %s" % (label, why))

    def equal(self, label, got, expected):
        if matches(got, expected):
            self.passed += 1
        else:
            self.fail(label, "got %r, expected %r" % (got, expected))

    def run(self, label, function, *args, **kwargs):
        """function(*args, **kwargs), or None after recording its TuttiError as a failure."""
        try:
            return function(*args, **kwargs)
        except hvd.TuttiError as exc:
            self.fail(label, "%s: %s" % (type(exc).__name__, exc))
            return None

    def expect_error(self, label, error, function):
        """The message of the `error` function() raises; records a failure otherwise."""
        try:
            function()
        except error as exc:
            self.passed += 1
            return str(exc)
        except Exception as exc:
            self.fail(label, "expected %s, got %s: %s" % (error.__name__, type(exc).__name__, exc))
        else:
            self.fail(label, "expected %s, but the call succeeded" % error.__name__)
        return None

    def report(self):
        """Prints the failures and the summary line; returns the exit status."""
        for failure in self.failures:
            say("rank %d: FAIL %s" % (self.rank, failure))
        say("rank %d/%d: %d cases ok, %d failed" % (
            self.rank, self.size, self.passed, len(self.failures)))
        return 1 if self.failures else 0
