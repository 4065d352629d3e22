"""An elastic Keras run for tests/elastic: model.fit with the elastic callbacks.

A small dense regression model in float64 on fixed data: 144 samples, 6 global batches of
24 per epoch. Worker `rank` of `size` trains on its 24/size rows of every global batch, so
each step averages the gradient of the whole global batch whatever the size; a run alone
(no launcher) gives the weights of a job without failures. A commit every 2 batches and at
each epoch's end (CommitStateCallback); after a re-formation fit resumes at the committed
epoch and batch (UpdateBatchStateCallback). JSON events, as in torch_train.py:
  step {gen, rank, size, epoch, batch, indices}, crash, reset {rank, size}, final {weights}
--crash-host H [--crash-epoch E --crash-batch B] kills (SIGKILL) the worker on host H when
it reaches that batch in generation 0; --fail-host H makes a worker on H exit with code 3
at once; --horovod-epochs calls fit as Horovod's examples do (epochs=EPOCHS - state.epoch,
fit counting from 0) instead of initial_epoch=state.epoch.
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


def rows(rank, size):
    """The rows worker `rank` of `size` trains on, in order: its part of every batch."""
    part = GLOBAL_BATCH // size
    return [b * GLOBAL_BATCH + rank * part + i for b in range(BATCHES) for i in range(part)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--step-seconds", type=float, default=0.0)
    parser.add_argument("--crash-host")
    parser.add_argument("--crash-epoch", type=int, default=1)
    parser.add_argument("--crash-batch", type=int, default=3)
    parser.add_argument("--fail-host")
    parser.add_argument("--horovod-epochs", action="store_true")
    args = parser.parse_args()
    host = os.environ.get("HOROVOD_HOSTNAME")
    if args.fail_host and host == args.fail_host:
        sys.stderr.write("failing on purpose on %s\n" % host)
        sys.exit(3)

    import numpy as np
    import keras
    import tutti.tensorflow.keras as hvd

    hvd.init()
    keras.config.set_floatx("float64")
    rng = np.random.RandomState(3)
    x = rng.randn(SAMPLES, FEATURES)
    y = x @ np.arange(1, FEATURES + 1, dtype="float64").reshape(FEATURES, 1)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(8, activation="tanh"),
                              keras.layers.Dense(1)])
    optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9))
    model.compile(optimizer=optimizer, loss="mse")
    state = hvd.elastic.KerasState(model, optimizer, epoch=0, batch=0)
    state.register_reset_callbacks([lambda: say(event="reset", rank=hvd.rank(),
                                                size=hvd.size())])

    class Log(keras.callbacks.Callback):
        """Logs every trained batch (not those before the committed one, which
        UpdateBatchStateCallback passes over) and crashes where asked."""

        def on_train_begin(self, logs=None):
            self.resume = (state.epoch, state.batch)
            self.epoch = None

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = state.epoch  # fit's own count may start at 0 (--horovod-epochs)

        def on_train_batch_begin(self, batch, logs=None):
            if (self.epoch, batch) < self.resume:
                return
            if (args.crash_host and host == args.crash_host and generation() == 0
                    and (self.epoch, batch) == (args.crash_epoch, args.crash_batch)):
                say(event="crash", rank=hvd.rank())
                os.kill(os.getpid(), signal.SIGKILL)
            part = GLOBAL_BATCH // hvd.size()
            start = batch * GLOBAL_BATCH + hvd.rank() * part
            say(event="step", gen=generation(), rank=hvd.rank(), size=hvd.size(),
                epoch=self.epoch, batch=batch, indices=list(range(start, start + part)))

        def on_train_batch_end(self, batch, logs=None):
            if args.step_seconds:
                time.sleep(args.step_seconds)

    @hvd.elastic.run
    def train(state):
        mine = rows(hvd.rank(), hvd.size())
        if args.horovod_epochs:
            epochs = dict(epochs=args.epochs - state.epoch)
        else:
            epochs = dict(initial_epoch=state.epoch, epochs=args.epochs)
        # Log first: it sees the epoch before UpdateEpochStateCallback moves it on.
        model.fit(x[mine], y[mine], batch_size=GLOBAL_BATCH // hvd.size(), shuffle=False,
                  verbose=0, callbacks=[Log(), hvd.elastic.UpdateEpochStateCallback(state),
                                        hvd.elastic.UpdateBatchStateCallback(state),
                                        hvd.elastic.CommitStateCallback(state, 2)], **epochs)

    train(state)
    say(event="final", rank=hvd.rank(), size=hvd.size(), epoch=state.epoch,
        weights=[w.flatten().tolist() for w in model.get_weights()])


if __name__ == "__main__":
    main()
