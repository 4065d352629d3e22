"""DistributedTrainer and DistributedOptimizer on N ranks match local training on the
concatenated batch.

Each rank trains on its slice of every global batch; each rank then repeats the run alone
with a local gluon.Trainer (or Module) on the whole batches and compares the weights. Runs
the trainer per gradient, grouped (num_groups), with gradient_predivide_factor != 1, with
fp16 compression and on a process set; two trainers stepping at the same time; a step that
returns before the other ranks have reduced; the Module API with DistributedOptimizer;
broadcast_parameters (per-rank initial weights, a dict with a non-zero root, deferred
initialisation); bad arguments. Prints "rank R: trainer checks passed".
"""

import sys
import warnings

import tutti.mxnet as hvd

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

STEPS = 4
LOCAL_BATCH = 4
OPTIMIZER_PARAMS = {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3}


def build_model():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(8, activation="tanh", in_units=6))
    net.add(gluon.nn.Dense(8, activation="tanh", in_units=8))
    net.add(gluon.nn.Dense(3, in_units=8))
    return net


def global_batches(size, seed=7):
    data = np.random.RandomState(seed)
    return [
        (data.randn(LOCAL_BATCH * size, 6).astype(np.float32),
         data.randint(0, 3, LOCAL_BATCH * size).astype(np.float32))
        for _ in range(STEPS)
    ]


def my_slice(batches, position):
    part = slice(position * LOCAL_BATCH, (position + 1) * LOCAL_BATCH)
    return [(x[part], y[part]) for x, y in batches]


def backward(net, features, labels):
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    with autograd.record():
        loss = loss_fn(net(mx.nd.array(features)), mx.nd.array(labels))
    loss.backward()


def train(net, trainer, batches, batch_size):
    for features, labels in batches:
        backward(net, features, labels)
        trainer.step(batch_size)


def weights(net):
    return [p.data().asnumpy() for _, p in net.collect_params().items()]


def model_with(values):
    net = build_model()
    net.initialize()
    for (_, param), value in zip(net.collect_params().items(), values):
        param.set_data(mx.nd.array(value))
    return net


def same_on_all_ranks(array, name, process_set=hvd.global_process_set):
    highest = hvd.allreduce(array, op=hvd.Max, name=name + ".max", process_set=process_set)
    lowest = hvd.allreduce(array, op=hvd.Min, name=name + ".min", process_set=process_set)
    return np.array_equal(highest.asnumpy(), lowest.asnumpy())


def close_on_all_ranks(array, name):
    """Equal up to rounding: Gloo's ring allreduce adds in a different order on each rank
    from 3 ranks on, so trained weights may differ in the last bits."""
    highest = hvd.allreduce(array, op=hvd.Max, name=name + ".max").asnumpy()
    lowest = hvd.allreduce(array, op=hvd.Min, name=name + ".min").asnumpy()
    return np.allclose(highest, lowest, rtol=1e-5, atol=1e-6)


def local_reference(initial, batches, ranks, optimizer="sgd", params=OPTIMIZER_PARAMS):
    """The weights after training alone on the whole batches of `ranks` ranks."""
    reference = model_with(initial)
    local = gluon.Trainer(reference.collect_params(), optimizer, dict(params), kvstore=None)
    train(reference, local, batches, LOCAL_BATCH * ranks)
    return weights(reference)


def assert_weights(got, want, initial, label, rtol=1e-4, atol=1e-5):
    for index, (g, w) in enumerate(zip(got, want)):
        assert not np.allclose(g, initial[index]), "%s: parameter %d did not change" % (
            label, index)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol,
                                   err_msg="%s: parameter %d" % (label, index))


def initial_weights(seed):
    """Xavier weights drawn on rank 0 (each rank draws its own; the broadcast keeps
    rank 0's)."""
    mx.random.seed(seed + hvd.rank())
    net = build_model()
    net.initialize(mx.init.Xavier())
    hvd.broadcast_parameters(net.collect_params(), root_rank=0, prefix="init%d." % seed)
    return weights(net)


def check_trainer_variants(rank, size):
    variants = [
        ("per gradient", {}, {}),
        ("num_groups=2", {"num_groups": 2}, {}),
        ("num_groups=5, predivide 4", {"num_groups": 5, "gradient_predivide_factor": 4.0}, {}),
        ("predivide 0.5", {"gradient_predivide_factor": 0.5}, {}),
        ("fp16 compression", {"compression": hvd.Compression.fp16},
         {"rtol": 2e-2, "atol": 2e-3}),
    ]
    batches = global_batches(size)
    for number, (label, options, tolerance) in enumerate(variants):
        initial = initial_weights(100 + number)
        for index, array in enumerate(initial):
            assert same_on_all_ranks(mx.nd.array(array), "initial.%d.%d" % (number, index))
        net = model_with(initial)
        trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", dict(OPTIMIZER_PARAMS),
                                         **options)
        train(net, trainer, my_slice(batches, rank), LOCAL_BATCH)
        assert_weights(weights(net), local_reference(initial, batches, size), initial, label,
                       **tolerance)


def check_two_trainers(rank, size):
    """Two trainers without prefixes, both stepping before either result is read."""
    adam = {"learning_rate": 0.01}
    first_initial, second_initial = initial_weights(200), initial_weights(201)
    first, second = model_with(first_initial), model_with(second_initial)
    first_trainer = hvd.DistributedTrainer(first.collect_params(), "sgd",
                                           dict(OPTIMIZER_PARAMS))
    second_trainer = hvd.DistributedTrainer(second.collect_params(), "adam", dict(adam))
    first_batches, second_batches = global_batches(size, 11), global_batches(size, 12)
    for (x1, y1), (x2, y2) in zip(my_slice(first_batches, rank), my_slice(second_batches, rank)):
        backward(first, x1, y1)
        backward(second, x2, y2)
        first_trainer.step(LOCAL_BATCH)
        second_trainer.step(LOCAL_BATCH)
    assert_weights(weights(first), local_reference(first_initial, first_batches, size),
                   first_initial, "first of two trainers")
    assert_weights(weights(second),
                   local_reference(second_initial, second_batches, size, "adam", adam),
                   second_initial, "second of two trainers")


def check_step_does_not_wait(rank, size):
    """Rank 0 steps, then waits for the others in a broadcast that they make before their
    own step: if step() waited for the gradient reduction, this would never finish."""
    initial = initial_weights(300)
    net = model_with(initial)
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", dict(OPTIMIZER_PARAMS),
                                     prefix="nowait.")
    batches = global_batches(size, 13)
    (features, labels), = my_slice(batches[:1], rank)
    backward(net, features, labels)
    if rank == 0:
        trainer.step(LOCAL_BATCH)
        hvd.broadcast_object("rank 0 returned from step", root_rank=0, name="after_step")
    else:
        message = hvd.broadcast_object(None, root_rank=0, name="after_step")
        assert message == "rank 0 returned from step", message
        trainer.step(LOCAL_BATCH)
    assert_weights(weights(net), local_reference(initial, batches[:1], size), initial,
                   "step without waiting")


def check_process_set(rank, size):
    """A trainer on the first two ranks averages over those two only."""
    members = [0, 1]
    subset = hvd.add_process_set(members)
    if rank in members:
        initial = initial_weights_on(subset, 400)
        net = model_with(initial)
        trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", dict(OPTIMIZER_PARAMS),
                                         process_set=subset, num_groups=2)
        batches = global_batches(len(members), 14)
        train(net, trainer, my_slice(batches, members.index(rank)), LOCAL_BATCH)
        assert_weights(weights(net), local_reference(initial, batches, len(members)),
                       initial, "process set")
    else:
        net = model_with(initial_weights_local(400))
        trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", dict(OPTIMIZER_PARAMS),
                                         process_set=subset)
        backward(net, *global_batches(1, 14)[0])
        try:
            trainer.step(LOCAL_BATCH)
        except hvd.InvalidArgumentError as exc:
            assert "rank %d is not in" % rank in str(exc), str(exc)
        else:
            raise AssertionError("a trainer on a set without this rank stepped")
    hvd.barrier()
    hvd.remove_process_set(subset)


def initial_weights_local(seed):
    mx.random.seed(seed)
    net = build_model()
    net.initialize(mx.init.Xavier())
    return weights(net)


def initial_weights_on(process_set, seed):
    values = [mx.nd.array(v) for v in initial_weights_local(seed + hvd.rank())]
    for index, value in enumerate(values):
        hvd.broadcast_(value, root_rank=0, name="set_init.%d" % index, process_set=process_set)
    return [v.asnumpy() for v in values]


def symbol_model():
    data = mx.sym.Variable("data")
    hidden = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=8, name="fc1"), "tanh")
    hidden = mx.sym.Activation(mx.sym.FullyConnected(hidden, num_hidden=8, name="fc2"), "tanh")
    output = mx.sym.FullyConnected(hidden, num_hidden=3, name="fc3")
    return mx.sym.SoftmaxOutput(output, name="softmax")


def module_run(arg_params, batches, batch, optimizer):
    module = mx.mod.Module(symbol_model(), context=mx.cpu())
    module.bind(data_shapes=[("data", (batch, 6))], label_shapes=[("softmax_label", (batch,))])
    module.init_params(arg_params={k: v.copy() for k, v in arg_params.items()},
                       force_init=True)
    module.init_optimizer(kvstore=None, optimizer=optimizer)
    for features, labels in batches:
        module.forward_backward(mx.io.DataBatch([mx.nd.array(features)],
                                                [mx.nd.array(labels)]))
        module.update()
    arg, _ = module.get_params()
    return {k: v.asnumpy() for k, v in arg.items()}


def check_module(rank, size):
    mx.random.seed(500 + rank)
    module = mx.mod.Module(symbol_model(), context=mx.cpu())
    module.bind(data_shapes=[("data", (LOCAL_BATCH, 6))],
                label_shapes=[("softmax_label", (LOCAL_BATCH,))])
    module.init_params(mx.init.Xavier())
    arg_params, _ = module.get_params()
    hvd.broadcast_parameters(arg_params, root_rank=0, prefix="module.")  # dict of NDArrays
    initial = {k: v.asnumpy() for k, v in arg_params.items()}
    batches = global_batches(size, 15)
    want = module_run(arg_params, batches, LOCAL_BATCH * size, mx.optimizer.SGD(
        rescale_grad=1.0 / (LOCAL_BATCH * size), **OPTIMIZER_PARAMS))
    for options in ({}, {"num_groups": 2, "gradient_predivide_factor": 2.0}):
        optimizer = hvd.DistributedOptimizer(mx.optimizer.SGD(
            rescale_grad=1.0 / LOCAL_BATCH, **OPTIMIZER_PARAMS), **options)
        assert optimizer.learning_rate == OPTIMIZER_PARAMS["learning_rate"]
        got = module_run(arg_params, my_slice(batches, rank), LOCAL_BATCH, optimizer)
        for name in sorted(want):
            assert not np.allclose(got[name], initial[name]), name
            np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5,
                                       err_msg="Module %s %s" % (options, name))
        optimizer.set_learning_rate(0.5)  # reaches the wrapped optimizer
        assert optimizer._optimizer.learning_rate == 0.5


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
    for index, (_, param) in enumerate(net.collect_params().items()):
        assert same_on_all_ranks(param.data(), "deferred.%d" % index), param.name
    # A trainer on a model whose initialisation is still deferred: the parameters are
    # broadcast when the first forward pass creates them, then trained.
    mx.random.seed(210 + rank)
    late = gluon.nn.Dense(3)
    late.initialize(mx.init.Xavier())
    hvd.broadcast_parameters(late.collect_params(), root_rank=0, prefix="late.")
    trainer = hvd.DistributedTrainer(late.collect_params(), "sgd", {"learning_rate": 0.1})
    train(late, trainer, my_slice(global_batches(size, 16), rank), LOCAL_BATCH)
    for index, (_, param) in enumerate(sorted(late.collect_params().items())):
        assert close_on_all_ranks(param.data(), "late.%d" % index), param.name


def expect(kind, fragment, call):
    try:
        call()
    except kind as exc:
        assert fragment in str(exc), "%r not in %r" % (fragment, str(exc))
    else:
        raise AssertionError("expected %s mentioning %r" % (kind.__name__, fragment))


def check_bad_arguments():
    params = build_model().collect_params()
    params.initialize()

    def trainer(**options):
        return hvd.DistributedTrainer(params, "sgd", {"learning_rate": 0.1}, **options)

    expect(ValueError, "gradient_predivide_factor", lambda: trainer(gradient_predivide_factor=0))
    expect(ValueError, "num_groups", lambda: trainer(num_groups=-1))
    expect(ValueError, "num_groups", lambda: trainer(num_groups=1.5))
    expect(TypeError, "compression", lambda: trainer(compression="fp16"))
    expect(TypeError, "prefix", lambda: trainer(prefix=3))
    expect(TypeError, "mx.optimizer.Optimizer", lambda: hvd.DistributedOptimizer("sgd"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        unwrapped = hvd.DistributedTrainer(
            params, hvd.DistributedOptimizer(mx.optimizer.SGD(learning_rate=0.3)))
    assert any("plain optimizer" in str(w.message) for w in caught), caught
    assert isinstance(unwrapped._optimizer, mx.optimizer.SGD)


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    check_trainer_variants(rank, size)
    check_two_trainers(rank, size)
    check_step_does_not_wait(rank, size)
    check_module(rank, size)
    check_broadcast(rank, size)
    check_process_set(rank, size)  # last: the ranks build different numbers of models
    check_bad_arguments()
    hvd.barrier()
    print("rank %d: trainer checks passed" % rank, flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
