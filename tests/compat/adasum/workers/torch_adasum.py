"""tutti.torch with op=hvd.Adasum: the collectives against the float64 numpy reference, and
DistributedOptimizer(op=hvd.Adasum) against a simulation of Horovod's delta optimizer.

The simulation keeps one copy of the model and of the optimizer per rank: every step, each
copy starts from the shared parameters, takes its local optimizer step on that rank's batch,
and the parameters become start + Adasum(every rank's change). The distributed optimizer must
give the same parameters on every rank. Prints "rank R/N: ok <check>" and "ALL OK".
"""

import copy
import sys

import numpy as np
import torch

import tutti.torch as hvd
from adasum_reference import adasum, check, tensor


def say(text):
    print(text, flush=True)


def collectives(rank, size):
    for dtype, np_dtype in ((torch.float32, np.float32), (torch.float64, np.float64),
                            (torch.float16, np.float16)):
        per_rank = [tensor(r, (6, 5), np_dtype, 10) for r in range(size)]
        mine = torch.from_numpy(per_rank[rank].copy())
        check(hvd.allreduce(mine, op=hvd.Adasum, name="ar.%s" % dtype).numpy(), per_rank,
              "allreduce %s" % dtype)
        hvd.allreduce_(mine, op=hvd.Adasum, name="ar_.%s" % dtype)
        check(mine.numpy(), per_rank, "allreduce_ %s" % dtype)
    groups = [[tensor(r, (n,), np.float32, 20 + n) * (10.0 ** n) for r in range(size)]
              for n in (1, 3)]
    got = hvd.grouped_allreduce([torch.from_numpy(g[rank]) for g in groups], op=hvd.Adasum,
                                name="grouped")
    for g, result in zip(groups, got):
        check(result.numpy(), g, "grouped_allreduce")
    handle = hvd.allreduce_async(torch.from_numpy(groups[0][rank]), op=hvd.Adasum, name="async")
    check(hvd.synchronize(handle).numpy(), groups[0], "allreduce_async")
    # The gradient is the Adasum of the output gradients (as in Horovod); identical output
    # gradients on every rank combine to themselves.
    x = torch.from_numpy(groups[0][rank]).requires_grad_()
    (hvd.allreduce(x, op=hvd.Adasum, name="grad") * 3.0).sum().backward()
    assert torch.allclose(x.grad, torch.full_like(x, 3.0)), x.grad


def batch(rank, step, pass_=0):
    g = torch.Generator().manual_seed(1000 * step + 10 * rank + pass_)
    features = torch.randn(8, 5, generator=g)
    return features, features @ torch.arange(1.0, 6.0).unsqueeze(1) + 0.1


def make_model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))


def loss_of(model, data):
    features, target = data
    return torch.nn.functional.mse_loss(model(features), target)


def simulate(make_optimizer, size, steps, passes):
    """Parameters after `steps` steps of Horovod's Adasum delta optimizer on `size` ranks."""
    shared = make_model()
    replicas = [copy.deepcopy(shared) for _ in range(size)]
    optimizers = [make_optimizer(m.parameters()) for m in replicas]
    for step in range(steps):
        deltas = []
        for r, (model, optimizer) in enumerate(zip(replicas, optimizers)):
            with torch.no_grad():
                for p, q in zip(model.parameters(), shared.parameters()):
                    p.copy_(q)
            optimizer.zero_grad()
            for pass_ in range(passes):
                loss_of(model, batch(r, step, pass_)).backward()
            optimizer.step()
            deltas.append([(p - q).detach().numpy().astype(np.float64)
                           for p, q in zip(model.parameters(), shared.parameters())])
        with torch.no_grad():
            for i, q in enumerate(shared.parameters()):
                combined = adasum([d[i] for d in deltas])
                q.add_(torch.from_numpy(combined).to(q.dtype))
    return [p.detach().clone() for p in shared.parameters()]


def delta_optimizer(rank, size, make_optimizer, label, steps=3, passes=1):
    model = make_model()
    optimizer = hvd.DistributedOptimizer(make_optimizer(model.parameters()),
                                         named_parameters=model.named_parameters(),
                                         op=hvd.Adasum, backward_passes_per_step=passes)
    for step in range(steps):
        optimizer.zero_grad()
        for pass_ in range(passes):
            loss_of(model, batch(rank, step, pass_)).backward()
        optimizer.step()
    expected = simulate(make_optimizer, size, steps, passes)
    for (name, p), e in zip(model.named_parameters(), expected):
        if not torch.allclose(p.detach(), e, rtol=1e-5, atol=1e-6):
            raise AssertionError("%s: %s differs from the simulation by %g" % (
                label, name, float((p.detach() - e).abs().max())))
        gathered = hvd.allgather(p.detach().unsqueeze(0), name="same.%s.%s" % (label, name))
        if not all(torch.equal(gathered[0], g) for g in gathered):
            raise AssertionError("%s: %s differs across ranks" % (label, name))


def training_converges(rank, size):
    torch.manual_seed(3)
    model = torch.nn.Linear(5, 1)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                         named_parameters=model.named_parameters(),
                                         op=hvd.Adasum)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    losses = []
    for step in range(40):
        optimizer.zero_grad()
        loss = loss_of(model, batch(rank, step))
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    if not np.mean(losses[-5:]) < 0.2 * np.mean(losses[:5]):
        raise AssertionError("loss did not fall: %s" % losses)


def refusals(rank, size):
    model = make_model()
    pair = hvd.add_process_set([0, 1])
    try:
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Adasum,
                                 process_set=pair)
        raise AssertionError("a process set other than the global one was accepted")
    except NotImplementedError as e:
        assert "non-global process sets" in str(e), e
    finally:
        hvd.remove_process_set(pair)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters(),
                                         op=hvd.Adasum)
    try:
        with optimizer.skip_synchronize():
            pass
        raise AssertionError("skip_synchronize was accepted")
    except AssertionError as e:
        assert "not supported when using Adasum" in str(e), e
    optimizer.synchronize()  # a no-op, as in Horovod


def refused_on_odd_counts(rank, size):
    model = make_model()
    for call in (lambda: hvd.allreduce(torch.ones(3), op=hvd.Adasum),
                 lambda: hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                                  op=hvd.Adasum)):
        try:
            call()
            raise AssertionError("Adasum on %d ranks was accepted" % size)
        except NotImplementedError as e:
            assert str(e) == "Running Adasum with non-power of 2 ranks is not supported yet.", e


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    sgd = lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9)  # noqa: E731
    adam = lambda params: torch.optim.Adam(params, lr=0.01)  # noqa: E731
    if size & (size - 1):
        checks = [("refused", lambda: refused_on_odd_counts(rank, size))]
    else:
        checks = [
            ("collectives", lambda: collectives(rank, size)),
            ("sgd", lambda: delta_optimizer(rank, size, sgd, "sgd")),
            ("adam", lambda: delta_optimizer(rank, size, adam, "adam")),
            ("passes", lambda: delta_optimizer(rank, size, sgd, "passes", passes=2)),
            ("converges", lambda: training_converges(rank, size)),
        ]
        if size > 1:
            checks.append(("refusals", lambda: refusals(rank, size)))
    for label, run in checks:
        try:
            run()
        except Exception as e:
            say("rank %d/%d: FAIL %s: %s: %s" % (rank, size, label, type(e).__name__, e))
            sys.exit(1)
        say("rank %d/%d: ok %s" % (rank, size, label))
    hvd.shutdown()
    say("rank %d/%d: ALL OK" % (rank, size))


if __name__ == "__main__":
    main()
