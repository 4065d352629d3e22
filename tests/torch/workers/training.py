"""Training with tutti.torch on any number of ranks, against one process training on the
concatenated batch (which every rank also computes itself, without communication):

- DistributedOptimizer (SGD with momentum, Adam): default settings, unnamed parameters,
  backward_passes_per_step=2, num_groups, explicit groups, gradient_predivide_factor,
  op=Sum, Compression.fp16, skip_synchronize with clipping, bfloat16 and float16
  parameters, a second wrapper over the same parameters, a process set, sparse gradients
  (allgathered and as dense), parameters some ranks do not use;
- SyncBatchNorm (1d, 2d, 3d inputs; affine or not; momentum None; uneven batches per
  rank; bfloat16) against torch's BatchNorm: outputs, running statistics, input and
  weight gradients, evaluation; and a SyncBatchNorm model trained by DistributedOptimizer;
- usage errors (duplicate or missing parameter names, too many backward passes,
  zero_grad with gradients in flight) and ranks whose parameters disagree in shape, which
  fail on every rank with the core's message and leave the job working.

Prints one summary line per rank; the exit code is 1 if anything differed.
"""

import os
import sys
import time

import torch

import tutti.torch as hvd

ROWS_PER_RANK = 4
STEPS = 2


class Checker:
    def __init__(self):
        self.rank, self.size = hvd.rank(), hvd.size()
        self.passed = 0
        self.failures = []

    def fail(self, label, detail):
        self.failures.append("%s: %s" % (label, detail))

    def close(self, label, got, want, tol):
        got, want = got.detach().to(torch.float64), want.detach().to(torch.float64)
        if got.shape != want.shape:
            return self.fail(label, "shape %s, expected %s" % (tuple(got.shape),
                                                              tuple(want.shape)))
        error = (got - want).abs().max().item() if got.numel() else 0.0
        if not error <= tol * (1.0 + want.abs().max().item() if want.numel() else 1.0):
            return self.fail(label, "max difference %.3g (tolerance %.1g)" % (error, tol))
        self.passed += 1

    def raises(self, label, error, function, *words):
        try:
            function()
        except error as exc:
            missing = [w for w in words if w not in str(exc)]
            if missing:
                return self.fail(label, "message lacks %s: %s" % (missing, exc))
            self.passed += 1
        except Exception as exc:  # noqa: BLE001
            self.fail(label, "expected %s, got %s: %s" % (error.__name__, type(exc).__name__,
                                                          exc))
        else:
            self.fail(label, "expected %s, but the call succeeded" % error.__name__)

    def guarded(self, label, function):
        try:
            function()
        except Exception as exc:  # noqa: BLE001  recorded, so that the other cases run
            self.fail(label, "%s: %s" % (type(exc).__name__, exc))


def dataset(size, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(size * ROWS_PER_RANK, 6, generator=generator)
    y = torch.randn(size * ROWS_PER_RANK, 3, generator=generator)
    return x, y


def make_model(dtype=torch.float32):
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(),
                               torch.nn.Linear(8, 3)).to(dtype)


def mse(model, x, y):
    return ((model(x.to(next(model.parameters()).dtype)) - y.to(torch.float32)) ** 2).mean()


def train_reference(make_optimizer, clip=None, dtype=torch.float32, lr_scale=1.0):
    """One process, the whole batch of every step."""
    model = make_model(dtype)
    optimizer = make_optimizer(model.parameters(), lr_scale)
    for step in range(STEPS):
        x, y = dataset(hvd.size(), step)
        optimizer.zero_grad()
        mse(model, x, y).backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
    return model


def train_distributed(make_optimizer, passes=1, clip=None, dtype=torch.float32, lr_scale=1.0,
                      named=True, **options):
    """Each rank trains on its rows of the batch, in `passes` micro-batches per step."""
    model = make_model(dtype)
    optimizer = hvd.DistributedOptimizer(
        make_optimizer(model.parameters(), lr_scale),
        named_parameters=model.named_parameters() if named else None,
        backward_passes_per_step=passes, **options)
    rank = hvd.rank()
    for step in range(STEPS):
        x, y = dataset(hvd.size(), step)
        rows = slice(rank * ROWS_PER_RANK, (rank + 1) * ROWS_PER_RANK)
        optimizer.zero_grad()
        for xs, ys in zip(x[rows].chunk(passes), y[rows].chunk(passes)):
            (mse(model, xs, ys) / passes).backward()
        if clip:
            optimizer.synchronize()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            with optimizer.skip_synchronize():
                optimizer.step()
        else:
            optimizer.step()
    return model


def sgd(params, lr_scale):
    return torch.optim.SGD(params, lr=0.1 * lr_scale, momentum=0.9)


def adam(params, lr_scale):
    return torch.optim.Adam(params, lr=0.01 * lr_scale)


def compare_models(check, label, got, want, tol):
    for (name, p), q in zip(got.named_parameters(), want.parameters()):
        check.close("%s.%s" % (label, name), p, q, tol)
    # every rank holds bit-identical weights (every rank gets the same reduction result)
    names, params = zip(*[(n, p.detach().float()) for n, p in got.named_parameters()])
    highs = hvd.grouped_allreduce(list(params), op=hvd.Max, name=label + ".max")
    lows = hvd.grouped_allreduce(list(params), op=hvd.Min, name=label + ".min")
    for name, high, low in zip(names, highs, lows):
        check.close("%s.%s.across_ranks" % (label, name), high, low, 0.0)


def optimizer_cases(check):
    cases = [
        ("default", sgd, {}, {}, 1e-5),
        ("unnamed", sgd, {"named": False}, {}, 1e-5),
        ("passes2", sgd, {"passes": 2}, {}, 1e-5),
        ("num_groups2", sgd, {"num_groups": 2}, {}, 1e-5),
        ("predivide", sgd, {"gradient_predivide_factor": 2.0}, {}, 1e-5),
        # the sum of the ranks' mean gradients is size times the mean over the batch
        ("sum", sgd, {"op": hvd.Sum, "lr_scale": 1.0 / check.size}, {}, 1e-5),
        ("fp16", sgd, {"compression": hvd.Compression.fp16}, {}, 5e-3),
        ("clip", sgd, {"clip": 0.5}, {"clip": 0.5}, 1e-5),
        ("adam", adam, {}, {}, 1e-5),
        ("adam.passes2.groups", adam, {"passes": 2, "num_groups": 3}, {}, 1e-5),
        ("bfloat16", sgd, {"dtype": torch.bfloat16}, {"dtype": torch.bfloat16}, 3e-2),
        ("float16.fp16", sgd, {"dtype": torch.float16, "compression": hvd.Compression.fp16},
         {"dtype": torch.float16}, 5e-3),
    ]
    for label, make, options, reference_options, tol in cases:
        def run():
            got = train_distributed(make, **options)
            want = train_reference(make, **reference_options)
            compare_models(check, "opt." + label, got, want, tol)
        check.guarded("opt." + label, run)

    def explicit_groups():
        model = make_model()
        first, second = model[0], model[2]
        optimizer = hvd.DistributedOptimizer(
            sgd(model.parameters(), 1.0), named_parameters=model.named_parameters(),
            groups=[[first.weight, second.bias], [first.bias]])
        rank = hvd.rank()
        for step in range(STEPS):
            x, y = dataset(hvd.size(), step)
            rows = slice(rank * ROWS_PER_RANK, (rank + 1) * ROWS_PER_RANK)
            optimizer.zero_grad()
            mse(model, x[rows], y[rows]).backward()
            optimizer.step()
        compare_models(check, "opt.groups", model, train_reference(sgd), 1e-5)
    check.guarded("opt.groups", explicit_groups)

    def wrapped_twice():
        # A second DistributedOptimizer over the same parameters takes them over.
        model = make_model()
        hvd.DistributedOptimizer(sgd(model.parameters(), 1.0),
                                 named_parameters=model.named_parameters())
        optimizer = hvd.DistributedOptimizer(sgd(model.parameters(), 1.0),
                                             named_parameters=model.named_parameters())
        rank = hvd.rank()
        for step in range(STEPS):
            x, y = dataset(hvd.size(), step)
            rows = slice(rank * ROWS_PER_RANK, (rank + 1) * ROWS_PER_RANK)
            optimizer.zero_grad()
            mse(model, x[rows], y[rows]).backward()
            optimizer.step()
        compare_models(check, "opt.wrapped_twice", model, train_reference(sgd), 1e-5)
    check.guarded("opt.wrapped_twice", wrapped_twice)


def unused_parameters(check):
    """Rank 0 alone uses the `extra` layer and no rank uses `idle`: the others contribute
    zeros for `extra`, so its averaged gradient is rank 0's divided by the size."""
    torch.manual_seed(3)
    body, extra, idle = torch.nn.Linear(4, 2), torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    params = {"body": body, "extra": extra, "idle": idle}
    named = [("%s.%s" % (k, n), p) for k, m in params.items() for n, p in m.named_parameters()]
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD([p for _, p in named], lr=1.0),
                                         named_parameters=named)
    x = torch.ones(3, 4)
    # rank 0's own gradient, computed aside (the .grad being reduced must not be read)
    (local_extra,) = torch.autograd.grad(extra(body(x)).sum(), extra.weight)
    out = body(x)
    if hvd.rank() == 0:
        out = extra(out)
    out.sum().backward()
    optimizer.synchronize()
    expected = hvd.broadcast(local_extra, 0, name="unused.expected") / hvd.size()
    check.close("unused.extra.grad", extra.weight.grad, expected, 1e-6)
    idle_grad = idle.weight.grad if idle.weight.grad is not None else torch.zeros(2, 2)
    check.close("unused.idle.grad", idle_grad, torch.zeros(2, 2), 0.0)
    with optimizer.skip_synchronize():
        optimizer.step()


def process_set_training(check):
    """DistributedOptimizer over the set of all ranks but the last: its members match one
    process on their concatenated rows; the last rank is not involved."""
    if check.size < 3:
        return
    members = check.size - 1
    head = hvd.add_process_set(list(range(members)))

    def train(distributed):
        model = make_model()
        optimizer = sgd(model.parameters(), 1.0)
        if distributed:
            optimizer = hvd.DistributedOptimizer(
                optimizer, named_parameters=model.named_parameters(), process_set=head)
        for step in range(STEPS):
            x, y = dataset(members, step)
            if distributed:
                rows = slice(head.rank() * ROWS_PER_RANK, (head.rank() + 1) * ROWS_PER_RANK)
                x, y = x[rows], y[rows]
            optimizer.zero_grad()
            mse(model, x, y).backward()
            optimizer.step()
        return model

    if head.included():
        got, want = train(True), train(False)
        for (name, p), q in zip(got.named_parameters(), want.parameters()):
            check.close("opt.process_set." + name, p, q, 1e-5)
    hvd.barrier()
    hvd.remove_process_set(head)


def sparse_gradients(check):
    """An embedding with sparse gradients against the same model with dense ones."""
    def run(sparse, distributed, **options):
        torch.manual_seed(11)
        embedding = torch.nn.Embedding(10, 3, sparse=sparse)
        optimizer = torch.optim.SGD(embedding.parameters(), lr=0.5)
        if distributed:
            optimizer = hvd.DistributedOptimizer(
                optimizer, named_parameters=embedding.named_parameters(), **options)
        size, rank = hvd.size(), hvd.rank()
        for step in range(STEPS):
            generator = torch.Generator().manual_seed(100 + step)
            ids = torch.randint(0, 10, (size * ROWS_PER_RANK,), generator=generator)
            target = torch.randn(size * ROWS_PER_RANK, 3, generator=generator)
            if distributed:
                rows = slice(rank * ROWS_PER_RANK, (rank + 1) * ROWS_PER_RANK)
                ids, target = ids[rows], target[rows]
            optimizer.zero_grad()
            ((embedding(ids) - target) ** 2).mean().backward()
            optimizer.step()
        return embedding.weight.detach()

    want = run(False, False)
    check.close("sparse.allgather", run(True, True), want, 1e-5)
    check.close("sparse.as_dense", run(True, True, sparse_as_dense=True), want, 1e-5)


def usage_errors(check):
    model = make_model()
    named = list(model.named_parameters())
    check.raises("error.duplicate_names", ValueError, lambda: hvd.DistributedOptimizer(
        sgd(model.parameters(), 1.0), named_parameters=[("w", p) for _, p in named]),
        "unique", "w")
    check.raises("error.missing_names", ValueError, lambda: hvd.DistributedOptimizer(
        sgd(model.parameters(), 1.0), named_parameters=named[:2]), "not in it")
    check.raises("error.not_pairs", ValueError, lambda: hvd.DistributedOptimizer(
        sgd(model.parameters(), 1.0), named_parameters=[p for _, p in named]), "tuples")
    check.raises("error.predivide_sum", ValueError, lambda: hvd.DistributedOptimizer(
        sgd(model.parameters(), 1.0), op=hvd.Sum, gradient_predivide_factor=2.0), "Average")
    check.raises("error.not_optimizer", hvd.InvalidArgumentError,
                 lambda: hvd.DistributedOptimizer(model), "torch.optim.Optimizer")
    if check.size == 1:
        return
    optimizer = hvd.DistributedOptimizer(sgd(model.parameters(), 1.0),
                                         named_parameters=model.named_parameters())
    x, y = dataset(1, 0)
    mse(model, x, y).backward()
    check.raises("error.zero_grad_in_flight", AssertionError, optimizer.zero_grad, "zero_grad")
    check.raises("error.too_many_passes", AssertionError,
                 lambda: mse(model, x, y).backward(), "backward_passes_per_step")
    optimizer.synchronize()
    optimizer.zero_grad()
    check.raises("error.sync_bn_1d", ValueError,
                 lambda: hvd.SyncBatchNorm(3)(torch.ones(3)), "2 dimensions")


def mismatched_parameters(check):
    """Ranks whose models disagree in shape: step() fails on every rank with the core's
    message naming the gradient, and the next collective works."""
    if check.size == 1:
        return
    layer = torch.nn.Linear(4, 2 + check.rank)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(layer.parameters(), lr=0.1),
                                         named_parameters=layer.named_parameters())
    layer(torch.ones(1, 4)).sum().backward()
    check.raises("error.mismatched_shapes", hvd.PreconditionError, optimizer.step,
                 "allreduce.", "shape", "rank 0", "rank 1")
    if not isinstance(hvd.PreconditionError("x"), RuntimeError):
        check.fail("error.mismatched_shapes", "PreconditionError is not a RuntimeError")
    got = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after.mismatch")
    check.close("error.mismatched_shapes.after", got, torch.full((2,), float(check.size)), 0.0)
    check.raises("error.broadcast_shape", RuntimeError, lambda: hvd.broadcast(
        torch.ones(2 + check.rank), 0, name="bshape"), "bshape", "shape")
    check.raises("error.reducescatter_shape", RuntimeError, lambda: hvd.reducescatter(
        torch.ones(4, 1 + check.rank), name="rsshape"), "rsshape", "shape")


# ---- SyncBatchNorm ----

BN_CASES = [
    # label, torch class, per-sample shape (C first), options
    ("1d", torch.nn.BatchNorm1d, (3,), {}),
    ("1d.seq", torch.nn.BatchNorm1d, (3, 5), {"momentum": None}),
    ("2d", torch.nn.BatchNorm2d, (2, 3, 3), {}),
    ("2d.noaffine", torch.nn.BatchNorm2d, (2, 3, 3), {"affine": False}),
    ("3d", torch.nn.BatchNorm3d, (2, 2, 2, 3), {"eps": 1e-3}),
]


def rows_of(rank):
    return rank + 2  # uneven batches


def sync_batch_norm_cases(check, dtype=torch.float32, tol=1e-5):
    size, rank = check.size, check.rank
    offset = sum(rows_of(r) for r in range(rank))
    for label, torch_class, shape, options in BN_CASES:
        label = "syncbn.%s.%s" % (label, str(dtype)[6:])
        channels = shape[0]
        reference = torch_class(channels, **options).to(dtype)
        sync = hvd.SyncBatchNorm(channels, **options).to(dtype)
        if reference.affine:
            with torch.no_grad():
                for module in (reference, sync):
                    module.weight.copy_(torch.linspace(0.5, 1.5, channels))
                    module.bias.copy_(torch.linspace(-0.2, 0.2, channels))
        for step in range(2):
            generator = torch.Generator().manual_seed(step * 31 + len(shape))
            total = sum(rows_of(r) for r in range(size))
            x = (torch.randn((total,) + shape, generator=generator) * 2 + 1).to(dtype)
            g = torch.randn((total,) + shape, generator=generator).to(dtype)
            for module in (reference, sync):
                if module.affine:
                    module.weight.grad = module.bias.grad = None
            x_ref = x.clone().requires_grad_()
            y_ref = reference(x_ref)
            (y_ref.float() * g.float()).sum().backward()
            mine = slice(offset, offset + rows_of(rank))
            x_mine = x[mine].clone().requires_grad_()
            y_mine = sync(x_mine)
            (y_mine.float() * g[mine].float()).sum().backward()
            sub = "%s.step%d" % (label, step)
            check.close(sub + ".output", y_mine, y_ref[mine], tol)
            check.close(sub + ".input_grad", x_mine.grad, x_ref.grad[mine], tol)
            check.close(sub + ".running_mean", sync.running_mean, reference.running_mean, tol)
            check.close(sub + ".running_var", sync.running_var, reference.running_var, tol)
            if int(sync.num_batches_tracked) != int(reference.num_batches_tracked):
                check.fail(sub + ".num_batches_tracked", int(sync.num_batches_tracked))
            if reference.affine:
                summed = hvd.grouped_allreduce([sync.weight.grad.float(),
                                                sync.bias.grad.float()], op=hvd.Sum)
                check.close(sub + ".weight_grad", summed[0], reference.weight.grad, tol * 10)
                check.close(sub + ".bias_grad", summed[1], reference.bias.grad, tol * 10)
        reference.eval()
        sync.eval()
        x = torch.randn((3,) + shape).to(dtype)
        check.close(label + ".eval", sync(x), reference(x), tol)


def sync_batch_norm_training(check):
    """A small CNN with SyncBatchNorm trained by DistributedOptimizer equals the same CNN
    with BatchNorm2d trained on the concatenated batch."""
    def build(norm):
        torch.manual_seed(5)
        return torch.nn.Sequential(torch.nn.Conv2d(1, 3, 3), norm(3), torch.nn.ReLU(),
                                   torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 2))

    def batch(step):
        generator = torch.Generator().manual_seed(50 + step)
        return (torch.randn(check.size * 2, 1, 6, 6, generator=generator),
                torch.randn(check.size * 2, 2, generator=generator))

    reference = build(torch.nn.BatchNorm2d)
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(STEPS):
        x, y = batch(step)
        optimizer.zero_grad()
        ((reference(x) - y) ** 2).mean().backward()
        optimizer.step()
    model = hvd.SyncBatchNorm.convert_sync_batchnorm(build(torch.nn.BatchNorm2d))
    if not isinstance(model[1], hvd.SyncBatchNorm):
        check.fail("syncbn.convert", type(model[1]).__name__)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters())
    mine = slice(check.rank * 2, check.rank * 2 + 2)
    for step in range(STEPS):
        x, y = batch(step)
        optimizer.zero_grad()
        ((model(x[mine]) - y[mine]) ** 2).mean().backward()
        optimizer.step()
    compare_models(check, "syncbn.training", model, reference, 1e-5)
    check.close("syncbn.training.running_var", model[1].running_var, reference[1].running_var,
                1e-5)


def main():
    hvd.init()
    check = Checker()
    sections = [
        ("optimizer", optimizer_cases),
        ("unused", unused_parameters),
        ("process_set", process_set_training),
        ("sparse", sparse_gradients),
        ("usage_errors", usage_errors),
        ("mismatched", mismatched_parameters),
        ("syncbn", sync_batch_norm_cases),
        ("syncbn.bfloat16", lambda c: sync_batch_norm_cases(c, torch.bfloat16, 3e-2)),
        ("syncbn.training", sync_batch_norm_training),
    ]
    for label, section in sections:
        start = time.monotonic()
        check.guarded(label, lambda: section(check))
        if os.environ.get("TRAINING_TIMES"):
            print("rank %d: %s took %.2f s" % (check.rank, label, time.monotonic() - start))
    hvd.barrier()
    hvd.shutdown()
    for failure in check.failures:
        print("rank %d: FAIL %s" % (check.rank, failure), flush=True)
    print("rank %d/%d: %d cases ok, %d failed" % (
        check.rank, check.size, check.passed, len(check.failures)), flush=True)
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
