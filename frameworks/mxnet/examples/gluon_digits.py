"""Data-parallel training of a Gluon classifier on scikit-learn's digits with tutti.

    mpirun -np 2 python gluon_digits.py
    tuttirun -np 2 python gluon_digits.py --epochs 10 --batch-size 32 --lr 0.1

Every rank trains on its own shard of the training split; gradients are averaged by
hvd.DistributedTrainer, so all ranks apply the same updates. Rank 0 prints the training
loss and the validation accuracy (computed on all ranks' shards of the validation split)
after each epoch. At the end the script checks that every rank holds the same weights.
It exits with status 1 when the validation accuracy stays below --target-accuracy or the
weights differ between ranks. The data set ships with scikit-learn: nothing is downloaded.
"""

import argparse
import sys
import time

import tutti.mxnet as hvd  # first: it also lets MXNet 1.9 import with a recent numpy

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from sklearn.datasets import load_digits

SEED = 42


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=10, help="passes over the training split")
    parser.add_argument("--batch-size", type=int, default=32, help="samples per step and rank")
    parser.add_argument("--lr", type=float, default=0.1, help="SGD learning rate")
    parser.add_argument(
        "--target-accuracy", type=float, default=0.9,
        help="final validation accuracy below which the script fails",
    )
    return parser.parse_args()


def load_split(validation_fraction=0.2):
    """The digits as float32 features in [0, 1] and int labels, split the same way on
    every rank (fixed seed)."""
    digits = load_digits()
    features = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    order = np.random.RandomState(SEED).permutation(len(labels))
    cut = int(len(labels) * (1 - validation_fraction))
    train, validation = order[:cut], order[cut:]
    return (features[train], labels[train]), (features[validation], labels[validation])


def shard(arrays, rank, size):
    """This rank's share: every size-th sample, starting at its rank."""
    return tuple(array[rank::size] for array in arrays)


def build_model():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(128, activation="relu", in_units=64))
    net.add(gluon.nn.Dense(10, in_units=128))
    return net


def global_mean(total, count, name):
    """sum(total) / sum(count) over all ranks."""
    sums = hvd.allreduce(mx.nd.array([total, count], dtype="float64"), op=hvd.Sum, name=name)
    total, count = sums.asnumpy()
    return total / count


def evaluate(net, features, labels, epoch):
    """Validation accuracy over every rank's shard."""
    predictions = net(mx.nd.array(features)).argmax(axis=1).asnumpy().astype(np.int64)
    correct = float((predictions == labels).sum())
    return global_mean(correct, len(labels), "validation.%d" % epoch)


def weights_identical(net):
    """True when every parameter is bit-for-bit the same on all ranks (its elementwise
    maximum over the ranks equals its minimum)."""
    identical = True
    for index, (name, param) in enumerate(sorted(net.collect_params().items())):
        data = param.data()
        highest = hvd.allreduce(data, op=hvd.Max, name="check.max.%d" % index)
        lowest = hvd.allreduce(data, op=hvd.Min, name="check.min.%d" % index)
        if not np.array_equal(highest.asnumpy(), lowest.asnumpy()):
            identical = False
            if hvd.rank() == 0:
                print("parameter %s differs between ranks" % name, flush=True)
    return identical


def main():
    args = parse_args()
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    started = time.time()

    (train_x, train_y), (valid_x, valid_y) = load_split()
    # Every rank takes the same number of steps per epoch, so the collectives pair up.
    steps = (len(train_y) // size) // args.batch_size
    if steps == 0:
        raise SystemExit("--batch-size %d is larger than a rank's shard" % args.batch_size)
    train_x, train_y = shard((train_x, train_y), rank, size)
    valid_x, valid_y = shard((valid_x, valid_y), rank, size)

    # Different seeds per rank make the broadcast matter: rank 0's initial weights win.
    mx.random.seed(SEED + rank)
    shuffle = np.random.RandomState(SEED + rank)
    net = build_model()
    net.initialize(mx.init.Xavier())
    net.hybridize()
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)
    trainer = hvd.DistributedTrainer(
        net.collect_params(), "sgd", {"learning_rate": args.lr, "momentum": 0.9}
    )
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    if rank == 0:
        print(
            "training on %d rank(s) (%s), %d samples per rank, %d steps per epoch"
            % (size, "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else "local",
               len(train_y), steps),
            flush=True,
        )
    accuracy = 0.0
    for epoch in range(args.epochs):
        order = shuffle.permutation(len(train_y))
        loss_sum = 0.0
        for step in range(steps):
            batch = order[step * args.batch_size:(step + 1) * args.batch_size]
            data, label = mx.nd.array(train_x[batch]), mx.nd.array(train_y[batch])
            with autograd.record():
                loss = loss_fn(net(data), label)
            loss.backward()
            trainer.step(args.batch_size)
            loss_sum += float(loss.sum().asscalar())
        train_loss = global_mean(loss_sum, steps * args.batch_size, "train_loss.%d" % epoch)
        accuracy = evaluate(net, valid_x, valid_y, epoch)
        if rank == 0:
            print(
                "epoch %2d  train loss %.4f  validation accuracy %.4f  (%.1f s)"
                % (epoch + 1, train_loss, accuracy, time.time() - started),
                flush=True,
            )

    identical = weights_identical(net)
    if rank == 0:
        print("weights identical on all %d ranks: %s" % (size, "yes" if identical else "NO"))
        print("final validation accuracy %.4f (target %.2f)" % (accuracy, args.target_accuracy))
    ok = identical and accuracy >= args.target_accuracy
    hvd.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
