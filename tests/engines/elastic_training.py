"""An elastic training function for the Ray engine tests, and its single-process reference.

Every worker trains a small linear model with tutti.torch's DistributedOptimizer under
hvd.elastic.run, committing every 2 batches. The data of a batch depends only on the
batch's index, so the averaged gradient equals each worker's own gradient: the final
weights equal those of plain SGD over the same batches whatever the job's size was at
each step, which lets a test check that training went on from the committed state.

Functions here are pickled by reference: the workers (Ray actors, Spark tasks' processes)
import this module (it is on their PYTHONPATH under Bazel).
"""

import os
import time

FEATURES = 4
LEARNING_RATE = 0.1
COMMIT_EVERY = 2


def _batch(index):
    import torch

    generator = torch.Generator().manual_seed(1000 + index)
    x = torch.randn(8, FEATURES, generator=generator)
    y = x.sum(dim=1, keepdim=True) * 0.5 + 0.25
    return x, y


def _model():
    import torch

    torch.manual_seed(0)
    return torch.nn.Linear(FEATURES, 1)


def reference_weights(batches):
    """The weights after `batches` plain SGD steps in this process."""
    import torch

    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    for index in range(batches):
        x, y = _batch(index)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    return _weights(model)


def _weights(model):
    return {name: p.detach().numpy().copy() for name, p in model.named_parameters()}


def train(batches=8, final_size=None, max_batches=300, step_seconds=0.2, progress_dir=None):
    """Trains until `batches` batches are done and, with `final_size`, the last batch ran
    with that many workers (at most `max_batches`: the test then fails on the size, not
    a hang). Every worker decides from state shared by all, so all stop at the same batch.

    With progress_dir, each worker writes <node address>.pid (its process id) there once
    2 batches are done, so that a test can act in the middle of training.
    Returns this worker's rank, size, batches done, the size at every batch, the sizes
    seen after each reset, and the weights.
    """
    import torch

    import tutti.torch as hvd

    torch.set_num_threads(1)
    hvd.init()
    model = _model()
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=LEARNING_RATE),
        named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, optimizer, batch=0, sizes=[])
    resets = []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])
    node = os.environ["HOROVOD_HOSTNAME"]  # the worker's host (a Ray node's address)

    def more():
        return state.batch < batches or (
            final_size is not None and state.sizes[-1] != final_size
            and state.batch < max_batches)

    @hvd.elastic.run
    def loop(state):
        while more():
            x, y = _batch(state.batch)
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
            state.sizes.append(hvd.size())
            state.batch += 1
            if progress_dir and state.batch == 2:
                path = os.path.join(progress_dir, node + ".pid")
                with open(path + ".tmp", "w") as stream:
                    stream.write(str(os.getpid()))
                os.replace(path + ".tmp", path)
            time.sleep(step_seconds)
            if state.batch % COMMIT_EVERY == 0:
                state.commit()

    loop(state)
    return {"rank": hvd.rank(), "size": hvd.size(), "batch": state.batch,
            "sizes": list(state.sizes), "resets": resets, "node": node,
            "weights": _weights(model)}


def wait_for_file(path, timeout=180):
    """The text of `path` once it exists; AssertionError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, "%s did not appear within %d s" % (path, timeout)
        time.sleep(0.05)
    with open(path) as stream:
        return stream.read()


def raise_on_every_worker():
    import tutti.torch as hvd

    hvd.init()
    raise ValueError("worker of rank %d gives up" % hvd.rank())
