"""An elastic MXNet Gluon run for tests/elastic (the same job as keras_train.py).

A small dense regression net in float64 on fixed data: 144 samples, 6 global batches of
24 per epoch; worker `rank` of `size` trains on its 24/size rows of every global batch, so
each step averages the gradient of the whole global batch whatever the size, and a run
alone (no launcher) gives the weights of a job without failures. A commit every 2 batches
and at each epoch's end; after a re-formation the loop resumes at the committed epoch and
batch. Events and options as in keras_train.py (no --horovod-epochs).
"""

import argparse
import json
import os
import signal
import sys
import time

SAMPLES, FEATURES, GLOBAL_BATCH = 144, 4, 24
BATCHES = SAMPLES // GLOBAL_BATCH


def say(**event):
    event["t"] = time.time()
    print(json.dumps(event), flush=True)


def generation():
    return int(os.environ.get("TUTTI_ELASTIC_GENERATION", "0"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--step-seconds", type=float, default=0.0)
    parser.add_argument("--crash-host")
    parser.add_argument("--crash-epoch", type=int, default=1)
    parser.add_argument("--crash-batch", type=int, default=3)
    parser.add_argument("--fail-host")
    args = parser.parse_args()
    host = os.environ.get("HOROVOD_HOSTNAME")
    if args.fail_host and host == args.fail_host:
        sys.stderr.write("failing on purpose on %s\n" % host)
        sys.exit(3)

    import numpy as np
    import mxnet as mx
    import tutti.mxnet as hvd

    hvd.init()
    rng = np.random.RandomState(3)
    x = rng.randn(SAMPLES, FEATURES)
    y = x @ np.arange(1, FEATURES + 1, dtype="float64").reshape(FEATURES, 1)
    mx.random.seed(0)
    net = mx.gluon.nn.HybridSequential()
    net.add(mx.gluon.nn.Dense(8, activation="tanh", in_units=FEATURES, dtype="float64"),
            mx.gluon.nn.Dense(1, in_units=8, dtype="float64"))
    net.initialize(mx.init.Xavier())
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd",
                                     {"learning_rate": 0.05, "momentum": 0.9})
    loss_fn = mx.gluon.loss.L2Loss()
    state = hvd.elastic.MXNetState(net.collect_params(), trainer, epoch=0, batch=0)
    state.register_reset_callbacks([lambda: say(event="reset", rank=hvd.rank(),
                                                size=hvd.size())])

    @hvd.elastic.run
    def train(state):
        part = GLOBAL_BATCH // hvd.size()
        while state.epoch < args.epochs:
            while state.batch < BATCHES:
                if (args.crash_host and host == args.crash_host and generation() == 0
                        and (state.epoch, state.batch) == (args.crash_epoch, args.crash_batch)):
                    say(event="crash", rank=hvd.rank())
                    os.kill(os.getpid(), signal.SIGKILL)
                start = state.batch * GLOBAL_BATCH + hvd.rank() * part
                say(event="step", gen=generation(), rank=hvd.rank(), size=hvd.size(),
                    epoch=state.epoch, batch=state.batch,
                    indices=list(range(start, start + part)))
                data = mx.nd.array(x[start:start + part], dtype="float64")
                label = mx.nd.array(y[start:start + part], dtype="float64")
                with mx.autograd.record():
                    loss = loss_fn(net(data), label)
                loss.backward()
                trainer.step(part)
                state.batch += 1
                if args.step_seconds:
                    time.sleep(args.step_seconds)
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
