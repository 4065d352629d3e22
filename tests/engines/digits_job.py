"""The digits example (frameworks/torch/examples/torch_digits.py) as a function that the
engines run: trains on every rank and returns the rank's final weights.

Functions here are pickled by reference, so the workers import this module too (it is on
their PYTHONPATH under Bazel and when run from tests/engines).
"""

import importlib.util
import os
import signal
import time

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                       "frameworks", "torch", "examples", "torch_digits.py")


def _example():
    spec = importlib.util.spec_from_file_location("torch_digits", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def train_digits(epochs=2, batch_size=32, lr=0.05, pid_dir=None):
    """Trains the example's model as its main() does; returns {name: numpy array}.

    With pid_dir, every rank writes its process id to pid_dir/rank<R>.pid after its first
    step (so that a test can kill a rank in the middle of training).
    """
    import torch

    import tutti.torch as hvd

    digits = _example()
    hvd.init()
    torch.set_num_threads(1)
    rank, size = hvd.rank(), hvd.size()
    (train_x, train_y), _ = digits.load_split()
    train_x, train_y = digits.shard((train_x, train_y), rank, size)
    model = digits.build_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr * size, momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    steps = int(hvd.allreduce(torch.tensor(len(train_y) // batch_size), op=hvd.Min,
                              name="steps"))
    generator = torch.Generator().manual_seed(digits.SEED + rank)
    for epoch in range(epochs):
        order = torch.randperm(len(train_y), generator=generator)
        for step in range(steps):
            batch = order[step * batch_size:(step + 1) * batch_size]
            optimizer.zero_grad()
            loss_fn(model(train_x[batch]), train_y[batch]).backward()
            optimizer.step()
            if pid_dir and epoch == 0 and step == 0:
                _write_pid(pid_dir, rank)
    weights = {name: param.detach().numpy().copy() for name, param in model.named_parameters()}
    hvd.shutdown()
    return weights


def _write_pid(pid_dir, rank):
    path = os.path.join(pid_dir, "rank%d.pid" % rank)
    with open(path + ".tmp", "w") as stream:
        stream.write(str(os.getpid()))
    os.rename(path + ".tmp", path)


def kill_when_started(pid_dir, rank, timeout=60):
    """Waits for rank `rank`'s pid file, then SIGKILLs that process; returns the time."""
    path = os.path.join(pid_dir, "rank%d.pid" % rank)
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError("rank %d never wrote %s" % (rank, path))
        time.sleep(0.02)
    with open(path) as stream:
        os.kill(int(stream.read()), signal.SIGKILL)
    return time.monotonic()


def rank_that_raises(bad_rank):
    """Every rank joins one allreduce; then `bad_rank` raises while the others wait in a
    second allreduce that can never complete."""
    import numpy

    import tutti.numpy as hvd

    hvd.init()
    hvd.allreduce(numpy.ones(4, dtype=numpy.float32), name="first")
    if hvd.rank() == bad_rank:
        raise ValueError("rank %d gives up" % bad_rank)
    hvd.allreduce(numpy.ones(4, dtype=numpy.float32), name="never")
    return hvd.rank()


def first_allreduce(_=None):
    """(rank, size, sum over ranks of rank+1, time.time() after the first allreduce)."""
    import numpy

    import tutti.numpy as hvd

    hvd.init()
    total = hvd.allreduce(numpy.array([hvd.rank() + 1.0]), op=hvd.Sum, name="first")
    done = time.time()
    result = (hvd.rank(), hvd.size(), float(total[0]), done)
    hvd.shutdown()
    return result


def listeners_during_a_job(driver_pid):
    """Rank 0 lists, in the middle of a job (Gloo connected), every socket that the driver
    or its descendants listen on beyond 127.0.0.1; returns that list on every rank."""
    import numpy

    import engine_checks
    import tutti.numpy as hvd

    hvd.init()
    hvd.allreduce(numpy.ones(1), name="before")
    found = engine_checks.listeners_beyond_loopback(driver_pid) if hvd.rank() == 0 else []
    hvd.allreduce(numpy.ones(1), name="after")
    hvd.shutdown()
    return found


def log_values(chief_only=True, count=3):
    """Every rank logs `count` dicts {"rank", "step"} through tutti.ray.ray_logger while
    tutti is initialised; returns the rank."""
    import numpy

    import tutti.numpy as hvd
    from tutti.ray import ray_logger

    hvd.init()
    rank = hvd.rank()
    for step in range(count):
        ray_logger.log({"rank": rank, "step": step}, chief_only=chief_only)
    hvd.allreduce(numpy.zeros(1), name="logged")  # no rank is done before every rank logged
    hvd.shutdown()
    return rank


def log_until_stopped(seconds=60):
    """Logs {"step": n} every 50 ms for up to `seconds` (rank 0's values reach the driver;
    tutti is not initialised, so ray_logger takes the rank from the environment); returns
    the number of values logged."""
    from tutti.ray import ray_logger

    step = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ray_logger.log({"step": step})
        step += 1
        time.sleep(0.05)
    return step
