"""An elastic MXNet Gluon run for tests/elastic.

A small dense regression net on fixed data; each worker trains on its shard (rank::size),
3 epochs of 6 batches, committing every 2 batches and resuming at the committed batch.
Prints JSON events: step {gen, rank, size, epoch, batch}, final {rank, size, epoch, weights}.
--crash-host H kills (SIGKILL) the worker on host H at epoch 1, batch 3 of generation 0.
"""

import argparse
import json
import os
import signal

import numpy as np

import tutti.mxnet as hvd
import mxnet as mx

EPOCHS, BATCHES = 3, 6


def say(**event):
    print(json.dumps(event), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--crash-host")
    args = parser.parse_args()
    host = os.environ.get("HOROVOD_HOSTNAME")

    hvd.init()
    rng = np.random.RandomState(3)
    x = rng.randn(144, 4).astype("float32")
    y = (x @ np.arange(1, 5, dtype="float32").reshape(4, 1)).astype("float32")
    mx.random.seed(0)
    net = mx.gluon.nn.HybridSequential()
    net.add(mx.gluon.nn.Dense(8, activation="tanh", in_units=4), mx.gluon.nn.Dense(1, in_units=8))
    net.initialize(mx.init.Xavier())
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd",
                                     {"learning_rate": 0.05, "momentum": 0.9})
    loss_fn = mx.gluon.loss.L2Loss()
    state = hvd.elastic.MXNetState(net.collect_params(), trainer, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        gen = int(os.environ["TUTTI_ELASTIC_GENERATION"])
        xs, ys = x[hvd.rank()::hvd.size()], y[hvd.rank()::hvd.size()]
        size = len(xs) // BATCHES
        while state.epoch < EPOCHS:
            while state.batch < BATCHES:
                if host == args.crash_host and gen == 0 and state.epoch == 1 and state.batch == 3:
                    os.kill(os.getpid(), signal.SIGKILL)
                say(event="step", gen=gen, rank=hvd.rank(), size=hvd.size(), epoch=state.epoch,
                    batch=state.batch)
                part = slice(state.batch * size, (state.batch + 1) * size)
                data, label = mx.nd.array(xs[part]), mx.nd.array(ys[part])
                with mx.autograd.record():
                    loss = loss_fn(net(data), label)
                loss.backward()
                trainer.step(size)
                state.batch += 1
                if state.batch % 2 == 0:
                    state.commit()
            state.epoch += 1
            state.batch = 0
            state.commit()

    train(state)
    say(event="final", rank=hvd.rank(), size=hvd.size(), epoch=state.epoch,
        weights=[p.data().asnumpy().flatten().tolist()
                 for p in net.collect_params().values()])


if __name__ == "__main__":
    main()
