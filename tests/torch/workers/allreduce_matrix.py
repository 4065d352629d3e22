"""Allreduce of torch tensors for every dtype x reduction x rank (1-3 dims), in place and
out of place, synchronous and asynchronous, plus scalars, empty and non-contiguous tensors,
scale factors, compression and autograd; run on any number of ranks (1 included).

Each rank builds every rank's input from a seed, computes the expected result itself and
prints one summary line; the exit code is 1 if anything differed.
"""

import sys
import warnings

import torch

import tutti.torch as hvd

DTYPES = [torch.uint8, torch.int8, torch.uint16, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool]
OPS = [hvd.Average, hvd.Sum, hvd.Min, hvd.Max, hvd.Product]
SHAPES = [(5,), (3, 4), (2, 3, 2)]
TOLERANCE = {torch.float16: 1e-3, torch.bfloat16: 1e-2, torch.float32: 1e-6, torch.float64: 1e-12}
UNSIGNED = (torch.uint8, torch.uint16)


def make_input(dtype, op, shape, case, rank):
    """Small values whose sums and products stay exact in `dtype` for a few ranks."""
    generator = torch.Generator().manual_seed(case * 1009 + rank)
    if dtype == torch.bool:
        return torch.rand(shape, generator=generator) < 0.5
    if op == hvd.Product:
        low, high = (1 if dtype in UNSIGNED else -2), 3
    else:
        low, high = (0 if dtype in UNSIGNED else -20), 20
    values = torch.randint(low, high, shape, generator=generator, dtype=torch.int64)
    if dtype in TOLERANCE:
        return (values.to(torch.float64) / (2.0 if op == hvd.Product else 4.0)).to(dtype)
    return values.to(dtype)


def truncate(values):
    """Integers are scaled in float64 and truncated toward zero, as in Horovod 0.28.1."""
    return torch.trunc(values)


def reference(dtype, op, inputs, prescale=1.0, postscale=1.0):
    """The core's documented semantics, computed in float64 (bool: logical or / and)."""
    if dtype == torch.bool:
        stack = torch.stack(inputs)
        return stack.any(dim=0) if op in (hvd.Sum, hvd.Max) else stack.all(dim=0)
    stack = torch.stack([x.to(torch.float64) for x in inputs])
    if prescale != 1.0:
        stack = prescale * stack
        if dtype not in TOLERANCE:
            stack = truncate(stack)
    if op in (hvd.Sum, hvd.Average):
        result = stack.sum(dim=0)
    elif op == hvd.Min:
        result = stack.min(dim=0).values
    elif op == hvd.Max:
        result = stack.max(dim=0).values
    else:
        result = stack.prod(dim=0)
    divisor = len(inputs) if op == hvd.Average else 1
    if divisor != 1 or postscale != 1.0:
        result = (postscale / divisor) * result
        if dtype not in TOLERANCE:
            result = truncate(result)
    return result.to(dtype)


def mismatch(got, expected):
    """None if `got` matches `expected` (dtype, shape, values), else a description."""
    if not isinstance(got, torch.Tensor):
        return "got %r instead of a tensor" % (got,)
    if got.dtype != expected.dtype or got.shape != expected.shape:
        return "got %s%s, expected %s%s" % (got.dtype, tuple(got.shape), expected.dtype,
                                            tuple(expected.shape))
    a, b = got.to(torch.float64), expected.to(torch.float64)
    tol = TOLERANCE.get(expected.dtype, 0.0)
    if not torch.allclose(a, b, rtol=tol, atol=tol):
        return "got %s, expected %s" % (got.tolist(), expected.tolist())
    return None


class Checker:
    def __init__(self):
        self.rank, self.size = hvd.rank(), hvd.size()
        self.passed = 0
        self.failures = []

    def fail(self, label, detail):
        self.failures.append("%s: %s" % (label, detail))

    def check(self, label, got, expected):
        """Counts a pass or records a failure; returns whether `got` matched."""
        problem = mismatch(got, expected)
        if problem:
            self.fail(label, problem)
        else:
            self.passed += 1
        return problem is None

    def inputs(self, dtype, op, shape, case):
        return [make_input(dtype, op, shape, case, r) for r in range(self.size)]

    def allreduce_all_ways(self, label, dtype, op, shape, case, prescale=1.0, postscale=1.0):
        """Out of place, in place, and both asynchronously, for one case."""
        inputs = self.inputs(dtype, op, shape, case)
        mine = inputs[self.rank]
        expected = reference(dtype, op, inputs, prescale, postscale)
        scales = dict(prescale_factor=prescale, postscale_factor=postscale)
        try:
            original = mine.clone()
            got = hvd.allreduce(mine, name=label, op=op, **scales)
            self.check(label, got, expected)
            if not torch.equal(mine, original):
                return self.fail(label, "the out-of-place call modified its input")

            tensor = mine.clone()
            returned = hvd.allreduce_(tensor, name=label + ".inplace", op=op, **scales)
            if returned is not tensor:
                return self.fail(label, "allreduce_ did not return its argument")
            self.check(label + ".inplace", tensor, expected)

            handle = hvd.allreduce_async(mine, name=label + ".async", op=op, **scales)
            self.check(label + ".async", hvd.synchronize(handle), expected)

            tensor = mine.clone()
            handle = hvd.allreduce_async_(tensor, name=label + ".async_", op=op, **scales)
            while not hvd.poll(handle):
                pass
            if hvd.synchronize(handle) is not tensor:
                return self.fail(label, "synchronize of allreduce_async_ did not return its tensor")
            self.check(label + ".async_", tensor, expected)
        except hvd.TuttiError as exc:
            self.fail(label, "%s: %s" % (type(exc).__name__, exc))

    def expect_error(self, label, error, function, *words):
        """Runs `function`, which must raise `error` whose message contains every word."""
        try:
            function()
        except error as exc:
            missing = [w for w in words if w not in str(exc)]
            if missing:
                return self.fail(label, "message lacks %s: %s" % (missing, exc))
            self.passed += 1
        except Exception as exc:
            self.fail(label, "expected %s, got %s: %s" % (error.__name__, type(exc).__name__, exc))
        else:
            self.fail(label, "expected %s, but the call succeeded" % error.__name__)


def dtype_matrix(check):
    case = 0
    for dtype in DTYPES:
        for op in OPS:
            for shape in SHAPES:
                case += 1
                label = "%s.%s.%dd" % (str(dtype)[6:], op.name, len(shape))
                if dtype == torch.bool and op == hvd.Average:
                    check.expect_error(label, RuntimeError, lambda: hvd.allreduce(
                        torch.ones(shape, dtype=torch.bool), name=label, op=op), "bool")
                    continue
                check.allreduce_all_ways(label, dtype, op, shape, case)


def special_shapes(check):
    for dtype in (torch.float32, torch.int64):
        name = str(dtype)[6:]
        check.allreduce_all_ways("scalar." + name, dtype, hvd.Sum, (), 1000)
        check.allreduce_all_ways("empty." + name, dtype, hvd.Sum, (0,), 1001)
        check.allreduce_all_ways("empty3d." + name, dtype, hvd.Max, (2, 0, 3), 1002)


def scale_factors(check):
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32,
                  torch.int64, torch.uint8):
        name = str(dtype)[6:]
        check.allreduce_all_ways("scale.sum." + name, dtype, hvd.Sum, (6,), 2000, 3.0, 0.5)
        check.allreduce_all_ways("scale.avg." + name, dtype, hvd.Average, (6,), 2001, 1.0, 2.0)


def non_contiguous(check):
    """Transposed and strided views: the result must land in the view's own layout."""
    for dtype in (torch.float32, torch.int16, torch.bfloat16):
        name = str(dtype)[6:]
        inputs = check.inputs(dtype, hvd.Sum, (4, 6), 3000)
        views = [x.t() for x in inputs]
        expected = reference(dtype, hvd.Sum, views)
        mine = views[check.rank]
        check.check("transposed." + name, hvd.allreduce(mine, op=hvd.Sum), expected)
        base = inputs[check.rank].clone()
        view = base.t()
        hvd.allreduce_(view, op=hvd.Sum)
        check.check("transposed_." + name, view, expected)
        base = inputs[check.rank].clone()
        view = base.t()
        hvd.allreduce_(view, op=hvd.Sum, name="transposed_.named." + name)
        check.check("transposed_.named." + name, view, expected)
        strided = [x[:, ::2] for x in inputs]
        expected = reference(dtype, hvd.Sum, strided)
        base = inputs[check.rank].clone()
        view = base[:, ::2]
        hvd.synchronize(hvd.allreduce_async_(view, op=hvd.Sum))
        check.check("strided_." + name, view, expected)
        check.check("strided_.untouched." + name, base[:, 1::2], inputs[check.rank][:, 1::2])


def named_in_place(check):
    """Named in-place calls with plain arguments take allreduce_'s short path: a parameter
    keeps its autograd state, the default op averages, and anything unusual (an int op,
    integer factors, the deprecated average flag) still gives the general path's result."""
    inputs = check.inputs(torch.float32, hvd.Sum, (3, 5), 3200)
    total = reference(torch.float32, hvd.Sum, inputs)
    param = torch.nn.Parameter(inputs[check.rank].clone())
    if hvd.allreduce_(param, op=hvd.Sum, name="named.param") is not param:
        check.fail("named.param.returned", "allreduce_ did not return its argument")
    check.check("named.param", param.detach(), total)
    if not param.requires_grad or param.grad is not None:
        check.fail("named.param_state", "the parameter's autograd state changed")
    plain = inputs[check.rank].clone()
    hvd.allreduce_(plain, name="named.default_op")
    check.check("named.default_op", plain, total / check.size)
    plain = inputs[check.rank].clone()
    hvd.allreduce_(plain, op=int(hvd.Sum), name="named.int_op", prescale_factor=2)
    check.check("named.int_op", plain, total * 2)
    plain = inputs[check.rank].clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        hvd.allreduce_(plain, average=False, name="named.average_flag")
    check.check("named.average_flag", plain, total)


def grouped_mixed(check):
    """One grouped call of a contiguous tensor, a transposed view and a parameter (a
    tuple): every result lands in its own tensor, the parameter keeps its autograd state.
    Then the same with contiguous tensors only, which take the one-check path."""
    inputs = check.inputs(torch.float32, hvd.Sum, (4, 6), 3100)
    expected = reference(torch.float32, hvd.Sum, inputs)
    expected_t = reference(torch.float32, hvd.Sum, [x.t() for x in inputs])
    plain = inputs[check.rank].clone()
    transposed = inputs[check.rank].clone().t()
    param = torch.nn.Parameter(inputs[check.rank].clone())
    returned = hvd.synchronize(hvd.grouped_allreduce_async_((plain, transposed, param),
                                                            op=hvd.Sum, name="grouped.mixed"))
    check.check("grouped.mixed.plain", plain, expected)
    check.check("grouped.mixed.transposed", transposed, expected_t)
    check.check("grouped.mixed.param", param.detach(), expected)
    if [r is t for r, t in zip(returned, (plain, transposed, param))] != [True] * 3:
        check.fail("grouped.mixed.returned", "grouped_allreduce_async_ did not return its tensors")
    if not param.requires_grad or param.grad is not None:
        check.fail("grouped.mixed.param_state", "the parameter's autograd state changed")
    param = torch.nn.Parameter(inputs[check.rank].clone())
    plain = inputs[check.rank].clone()
    hvd.grouped_allreduce_([param, plain], op=hvd.Sum, name="grouped.contiguous")
    check.check("grouped.contiguous.param", param.detach(), expected)
    check.check("grouped.contiguous.plain", plain, expected)
    outputs = hvd.grouped_allreduce([param.detach(), plain], op=hvd.Sum, name="grouped.new")
    check.check("grouped.new.0", outputs[0], expected * check.size)
    check.check("grouped.new.input_untouched", plain, expected)


def many_in_flight(check):
    """Several requests outstanding at once, synchronized in reverse order."""
    inputs = [check.inputs(torch.float32, hvd.Sum, (8,), 4000 + i) for i in range(6)]
    handles = [hvd.allreduce_async(x[check.rank], name="inflight.%d" % i, op=hvd.Sum)
               for i, x in enumerate(inputs)]
    for i in reversed(range(len(handles))):
        check.check("inflight.%d" % i, hvd.synchronize(handles[i]),
                    reference(torch.float32, hvd.Sum, inputs[i]))


def horovod_arguments(check):
    inputs = check.inputs(torch.float64, hvd.Sum, (4,), 5000)
    mine = inputs[check.rank]
    # Average is the default; the deprecated average flag still selects Average or Sum.
    check.check("default_op", hvd.allreduce(mine), reference(torch.float64, hvd.Average, inputs))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check.check("average=False", hvd.allreduce(mine, average=False),
                    reference(torch.float64, hvd.Sum, inputs))
    if not any(issubclass(w.category, DeprecationWarning) for w in caught):
        check.fail("average=False", "no DeprecationWarning for the average argument")
    check.expect_error("op_and_average", ValueError,
                       lambda: hvd.allreduce(mine, average=True, op=hvd.Sum), "op")
    check.expect_error("bad_op", ValueError, lambda: hvd.allreduce(mine, op=17), "op")
    check.expect_error("not_a_tensor", TypeError, lambda: hvd.allreduce([1.0, 2.0]), "Tensor")
    # fp16 compression reduces in float16 and hands back the caller's dtype.
    compressed = hvd.allreduce(mine, op=hvd.Sum, compression=hvd.Compression.fp16)
    check.check("fp16", compressed, reference(torch.float64, hvd.Sum, inputs))
    check.expect_error("unknown_handle", RuntimeError, lambda: hvd.synchronize(987654321),
                       "987654321")
    check.expect_error("complex", RuntimeError,
                       lambda: hvd.allreduce(torch.ones(2, dtype=torch.complex64)), "complex")


def autograd(check):
    """For Sum and Average the gradient of every input is the same reduction of the output
    gradients; here rank r's output gradient is r + 1."""
    weights = [float(r + 1) for r in range(check.size)]
    for op, expected in ((hvd.Sum, sum(weights)), (hvd.Average, sum(weights) / check.size)):
        x = torch.arange(4, dtype=torch.float32, requires_grad=True)
        y = hvd.allreduce(x, op=op, name="grad.%s" % op.name)
        (y * weights[check.rank]).sum().backward()
        check.check("grad." + op.name, x.grad, torch.full((4,), expected))


def main():
    hvd.init()
    check = Checker()
    dtype_matrix(check)
    special_shapes(check)
    scale_factors(check)
    non_contiguous(check)
    named_in_place(check)
    grouped_mixed(check)
    many_in_flight(check)
    horovod_arguments(check)
    autograd(check)
    hvd.shutdown()
    for failure in check.failures:
        print("rank %d: FAIL %s" % (check.rank, failure), flush=True)
    print("rank %d/%d: %d cases ok, %d failed" % (
        check.rank, check.size, check.passed, len(check.failures)), flush=True)
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
