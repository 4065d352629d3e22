"""DistributedTrainer on N ranks matches a local Trainer on the concatenated batch.

Each rank trains on its slice of every global batch; at the end each rank repeats the
whole run alone with gluon.Trainer on the full batches and compares the weights. Also
checks broadcast_parameters: different initial weights per rank, a dict of NDArrays with
a non-zero root, and parameters whose initialisation Gluon defers. Prints
"rank R: trainer checks passed".
"""

import sys

import tutti.mxnet as hvd

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

STEPS = 5
LOCAL_BATCH = 4


def build_model():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(8, activation="tanh", in_units=6))
    net.add(gluon.nn.Dense(3, in_units=8))
    return net


def global_batches(size):
    data = np.random.RandomState(7)
    return [
        (data.randn(LOCAL_BATCH * size, 6).astype(np.float32),
         data.randint(0, 3, LOCAL_BATCH * size).astype(np.float32))
        for _ in range(STEPS)
    ]


def train(net, trainer, batches, batch_size):
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for features, labels in batches:
        with autograd.record():
            loss = loss_fn(net(mx.nd.array(features)), mx.nd.array(labels))
        loss.backward()
        trainer.step(batch_size)


def weights(net):
    return [p.data().asnumpy() for _, p in sorted(net.collect_params().items())]


def same_on_all_ranks(array, name):
    highest = hvd.allreduce(array, op=hvd.Max, name=name + ".max").asnumpy()
    lowest = hvd.allreduce(array, op=hvd.Min, name=name + ".min").asnumpy()
    return np.array_equal(highest, lowest)


def check_trainer(rank, size):
    mx.random.seed(100 + rank)  # different initial weights on every rank
    net = build_model()
    net.initialize(mx.init.Xavier())
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)
    initial = weights(net)
    for index, array in enumerate(initial):
        assert same_on_all_ranks(mx.nd.array(array), "initial.%d" % index), index

    optimizer_params = {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3}
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", dict(optimizer_params))
    batches = global_batches(size)
    mine = [(x[rank * LOCAL_BATCH:(rank + 1) * LOCAL_BATCH],
             y[rank * LOCAL_BATCH:(rank + 1) * LOCAL_BATCH]) for x, y in batches]
    train(net, trainer, mine, LOCAL_BATCH)
    distributed = weights(net)

    # The same run alone, on the whole batches.
    reference = build_model()
    reference.initialize()
    for (_, param), value in zip(sorted(reference.collect_params().items()), initial):
        param.set_data(mx.nd.array(value))
    local = gluon.Trainer(reference.collect_params(), "sgd", dict(optimizer_params), kvstore=None)
    train(reference, local, batches, LOCAL_BATCH * size)
    for index, (got, want) in enumerate(zip(distributed, weights(reference))):
        assert not np.allclose(got, initial[index]), "parameter %d did not change" % index
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg="parameter %d" % index)


def check_predivide(rank, size):
    net = build_model()
    net.initialize(mx.init.Constant(0.5))
    trainer = hvd.DistributedTrainer(
        net.collect_params(), "sgd", {"learning_rate": 0.05}, gradient_predivide_factor=4.0,
        prefix="predivide.",
    )
    batches = global_batches(size)
    mine = [(x[rank::size], y[rank::size]) for x, y in batches]
    train(net, trainer, mine, LOCAL_BATCH)
    for index, (_, param) in enumerate(sorted(net.collect_params().items())):
        assert same_on_all_ranks(param.data(), "predivide.%d" % index)


def check_broadcast(rank, size):
    root = size - 1
    arrays = {
        "a": mx.nd.full((2, 3), rank + 1.0),
        "b": mx.nd.array(np.arange(4) * (rank + 1), dtype="int32"),
    }
    hvd.broadcast_parameters(arrays, root_rank=root)
    np.testing.assert_array_equal(arrays["a"].asnumpy(), np.full((2, 3), root + 1.0))
    np.testing.assert_array_equal(arrays["b"].asnumpy(), np.arange(4) * (root + 1))

    # No in_units: Gluon infers the shapes, and initialises, in the first forward pass.
    mx.random.seed(200 + rank)
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(5), gluon.nn.Dense(2))
    net.initialize(mx.init.Xavier())
    hvd.broadcast_parameters(net.collect_params(), root_rank=0, prefix="deferred.")
    net(mx.nd.ones((1, 3))).wait_to_read()
    for index, (_, param) in enumerate(sorted(net.collect_params().items())):
        assert same_on_all_ranks(param.data(), "deferred.%d" % index), param.name

    try:
        hvd.broadcast_parameters(arrays, root_rank=size)
    except ValueError:
        pass
    else:
        raise AssertionError("root_rank out of range was accepted")
    try:
        hvd.broadcast_parameters(build_model().collect_params())
    except RuntimeError as exc:
        assert "net.initialize()" in str(exc), str(exc)
    else:
        raise AssertionError("a model that was never initialised was accepted")


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    check_trainer(rank, size)
    check_predivide(rank, size)
    check_broadcast(rank, size)
    print("rank %d: trainer checks passed" % rank, flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
