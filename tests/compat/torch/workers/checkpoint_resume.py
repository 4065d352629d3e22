"""Horovod's documented resume pattern with every torch.optim optimizer: rank 0 loads a
checkpoint (model and optimizer state), the other ranks start fresh, every rank wraps its
optimizer in DistributedOptimizer, then

    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0, model=model)

and training goes on. Each model has a parameter that never gets a gradient, and each
optimizer two parameter groups with different per-group options (tuples such as betas,
etas, step_sizes included). Asserts that nothing hangs (the launcher's deadline), that
every rank ends with rank 0's optimizer state and options, and that the ranks' parameters
agree after a distributed step. Prints one line per rank; exit code 1 on any failure.
"""

import copy
import io
import sys

import torch

import tutti.torch as hvd

# Optimizer class -> (options of group 0, options of group 1): every tuple option differs
# between the groups, so a round trip that mixes them up fails.
OPTIONS = {
    "SGD": ({"lr": 0.1, "momentum": 0.9}, {"lr": 0.05, "momentum": 0.5, "nesterov": True}),
    "Adam": ({"lr": 0.01, "betas": (0.8, 0.99)}, {"lr": 0.02, "betas": (0.7, 0.98)}),
    "AdamW": ({"lr": 0.01, "betas": (0.8, 0.99)}, {"lr": 0.02, "betas": (0.7, 0.98),
                                                   "amsgrad": True}),
    "Adamax": ({"lr": 0.01, "betas": (0.8, 0.99)}, {"lr": 0.02, "betas": (0.7, 0.98)}),
    "NAdam": ({"lr": 0.01, "betas": (0.8, 0.99)}, {"lr": 0.02, "betas": (0.7, 0.98)}),
    "RAdam": ({"lr": 0.01, "betas": (0.8, 0.99)}, {"lr": 0.02, "betas": (0.7, 0.98)}),
    "Adadelta": ({"lr": 1.0, "rho": 0.9}, {"lr": 0.5, "rho": 0.8}),
    "Adagrad": ({"lr": 0.1}, {"lr": 0.05, "lr_decay": 0.01}),
    "Adafactor": ({"lr": 0.01}, {"lr": 0.02, "beta2_decay": -0.7}),
    "ASGD": ({"lr": 0.01}, {"lr": 0.02, "lambd": 1e-3}),
    "RMSprop": ({"lr": 0.01}, {"lr": 0.02, "momentum": 0.5, "centered": True}),
    "Rprop": ({"lr": 0.01, "etas": (0.4, 1.3), "step_sizes": (1e-5, 40.0)},
              {"lr": 0.02, "etas": (0.6, 1.1), "step_sizes": (1e-4, 20.0)}),
    "LBFGS": ({"lr": 0.5, "history_size": 4}, None),  # LBFGS takes one group only
    "SparseAdam": ({"lr": 0.01, "betas": (0.8, 0.99)}, {"lr": 0.02, "betas": (0.7, 0.98)}),
    "Muon": ({"lr": 0.01}, {"lr": 0.02, "momentum": 0.9}),
}


class Model(torch.nn.Module):
    def __init__(self, sparse):
        super().__init__()
        torch.manual_seed(7)
        self.sparse = sparse
        if sparse:
            self.first = torch.nn.Embedding(10, 4, sparse=True)
            self.second = torch.nn.Embedding(10, 4, sparse=True)
        else:
            self.first = torch.nn.Linear(4, 3, bias=False)
            self.second = torch.nn.Linear(3, 2, bias=False)
        # In the optimizer, never used in forward: it never gets a gradient.
        self.unused = torch.nn.Parameter(torch.ones(2, 2))

    def forward(self, x):
        if self.sparse:
            return (self.first(x) * self.second(x)).sum()
        return self.second(torch.tanh(self.first(x))).pow(2).sum()

    def batch(self, step):
        generator = torch.Generator().manual_seed(100 + step)
        if self.sparse:
            return torch.randint(0, 10, (6,), generator=generator)
        return torch.randn(5, 4, generator=generator)


def make(name):
    cls = getattr(torch.optim, name)
    model = Model(sparse=name == "SparseAdam")
    first, second = OPTIONS[name]
    if second is None:
        return model, cls(model.parameters(), **first)
    groups = [dict(first, params=[model.first.weight, model.unused]),
              dict(second, params=[model.second.weight])]
    if name == "SparseAdam":  # dense parameters are refused by SparseAdam
        groups[0]["params"] = [model.first.weight]
    return model, cls(groups)


def train_step(model, optimizer, step, distributed_lbfgs=False):
    def closure():
        optimizer.zero_grad()
        loss = model(model.batch(step))
        loss.backward()
        if distributed_lbfgs:  # LBFGS evaluates the closure repeatedly: reduce by hand
            for p in model.parameters():
                if p.grad is not None:
                    hvd.allreduce_(p.grad)
            # LBFGS also stops on the change of the loss: every rank must see the same
            # loss, or one rank stops an iteration before another.
            return hvd.allreduce(loss.detach())
        return loss

    if isinstance(optimizer, torch.optim.LBFGS):
        optimizer.step(closure)
    else:
        closure()
        optimizer.step()


def checkpoint(name):
    """What rank 0 loads: a model and optimizer trained for two local steps, saved and
    loaded back as torch.save / torch.load would."""
    model, optimizer = make(name)
    for step in range(2):
        train_step(model, optimizer, step)
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


def flatten(value, prefix=""):
    """Every leaf of a state_dict as (path, value), tensors as float64 lists."""
    if isinstance(value, dict):
        items = []
        for key in sorted(value, key=str):
            items += flatten(value[key], "%s/%s" % (prefix, key))
        return items
    if isinstance(value, (list, tuple)):
        items = [(prefix + ":type", type(value).__name__)]
        for i, v in enumerate(value):
            items += flatten(v, "%s[%d]" % (prefix, i))
        return items
    if isinstance(value, torch.Tensor):
        return [(prefix, (str(value.dtype), tuple(value.shape),
                          value.detach().to(torch.float64).flatten().tolist()))]
    return [(prefix, (type(value).__name__, value))]


def resume(name, failures):
    model, optimizer = make(name)
    if hvd.rank() == 0:
        saved = checkpoint(name)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
    lbfgs = isinstance(optimizer, torch.optim.LBFGS)
    if not lbfgs:
        # LBFGS calls zero_grad() inside step(), which DistributedOptimizer refuses while
        # allreduces are in flight (as Horovod's does); its gradients are reduced by hand.
        optimizer = hvd.DistributedOptimizer(optimizer,
                                             named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0, model=model)

    states = hvd.allgather_object(flatten(optimizer.state_dict()), name=name + ".state")
    for rank, state in enumerate(states[1:], start=1):
        if state != states[0]:
            differ = [a[0] for a, b in zip(states[0], state) if a != b] or ["length"]
            failures.append("%s: rank %d's optimizer state differs from rank 0's at %s"
                            % (name, rank, differ[:4]))
    groups = optimizer.param_groups
    if name in ("Adam", "Rprop") and hvd.rank() != 0:
        expected = OPTIONS[name][1]
        key = "betas" if name == "Adam" else "etas"
        if groups[1][key] != expected[key] or not isinstance(groups[1][key], tuple):
            failures.append("%s: group 1 %s is %r, expected rank 0's %r"
                            % (name, key, groups[1][key], expected[key]))
    if hvd.rank() != 0 and not optimizer.state:
        failures.append("%s: no state on rank %d after the broadcast" % (name, hvd.rank()))

    train_step(model, optimizer, 10 + hvd.rank(), lbfgs)  # different data per rank
    params = hvd.allgather_object([p.detach().clone() for p in model.parameters()],
                                  name=name + ".params")
    for rank, theirs in enumerate(params[1:], start=1):
        if any(not torch.equal(a, b) for a, b in zip(params[0], theirs)):
            failures.append("%s: parameters of rank %d differ from rank 0's after a "
                            "distributed step" % (name, rank))


def main():
    hvd.init()
    failures = []
    names = sorted(n for n in OPTIONS if hasattr(torch.optim, n))
    for name in names:
        try:
            resume(name, failures)
        except Exception as exc:  # recorded; the next optimizer still runs
            failures.append("%s: %s: %s" % (name, type(exc).__name__, exc))
            hvd.barrier()
    for failure in failures:
        print("rank %d: FAIL %s" % (hvd.rank(), failure), flush=True)
    print("rank %d/%d: %d optimizers resumed, %d failures"
          % (hvd.rank(), hvd.size(), len(names), len(failures)), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
