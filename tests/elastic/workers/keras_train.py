"""An elastic Keras run for tests/elastic: model.fit with the elastic callbacks.

A small dense regression model on fixed data; each worker fits its shard (rank::size) of
the data, 3 epochs of 6 batches, committing every 2 batches. Prints JSON events:
  epoch  {gen, rank, size, epoch}        at the start of each epoch
  final  {rank, size, epoch, weights}
--crash-host H kills (SIGKILL) the worker on host H at epoch 1, batch 3 of generation 0.
"""

import argparse
import json
import os
import signal

import numpy as np

import keras
import tutti.tensorflow.keras as hvd

EPOCHS = 3


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
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"),
                              keras.layers.Dense(1)])
    optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9))
    model.compile(optimizer=optimizer, loss="mse")
    state = hvd.elastic.KerasState(model, optimizer, epoch=0, batch=0)

    class Crash(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            say(event="epoch", gen=int(os.environ["TUTTI_ELASTIC_GENERATION"]),
                rank=hvd.rank(), size=hvd.size(), epoch=epoch)

        def on_train_batch_begin(self, batch, logs=None):
            if (host == args.crash_host and os.environ["TUTTI_ELASTIC_GENERATION"] == "0"
                    and state.epoch == 1 and batch == 3):
                os.kill(os.getpid(), signal.SIGKILL)

    @hvd.elastic.run
    def train(state):
        shard = slice(hvd.rank(), None, hvd.size())
        batch = len(x[shard]) // 6
        model.fit(x[shard], y[shard], batch_size=batch, initial_epoch=state.epoch,
                  epochs=EPOCHS, shuffle=False, verbose=0,
                  callbacks=[Crash(), hvd.elastic.UpdateEpochStateCallback(state),
                             hvd.elastic.UpdateBatchStateCallback(state),
                             hvd.elastic.CommitStateCallback(state, batches_per_commit=2)])

    train(state)
    say(event="final", rank=hvd.rank(), size=hvd.size(), epoch=state.epoch,
        weights=[w.flatten().tolist() for w in model.get_weights()])


if __name__ == "__main__":
    main()
