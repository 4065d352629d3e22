"""Data-parallel training of a Keras 3 classifier on scikit-learn's digits with tutti.

    mpirun -np 2 python keras_digits.py
    tuttirun -np 2 python keras_digits.py --epochs 10 --batch-size 32 --lr 0.05

Every rank trains on its own shard of the training split with model.fit;
hvd.DistributedOptimizer averages the gradients before each update, so all ranks apply
the same updates. The callbacks start every rank from rank 0's weights, average the
epoch's metrics over the ranks and warm the learning rate (scaled by the number of ranks)
up over the first epochs. Rank 0 prints the averaged metrics after each epoch. The script
exits with status 1 when the final validation accuracy stays below --target-accuracy or
the ranks' weights differ. The data set ships with scikit-learn: nothing is downloaded.
"""

import argparse
import sys

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

import keras
import tutti.tensorflow.keras as hvd

SEED = 42


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=10, help="passes over the training split")
    parser.add_argument("--batch-size", type=int, default=32, help="samples per step and rank")
    parser.add_argument("--lr", type=float, default=0.05, help="SGD learning rate of one rank")
    parser.add_argument("--warmup-epochs", type=int, default=2,
                        help="epochs over which the learning rate rises to lr * ranks")
    parser.add_argument("--target-accuracy", type=float, default=0.9,
                        help="final validation accuracy below which the script fails")
    return parser.parse_args()


def load_split(validation_fraction=0.2):
    """Features in [0, 1] and labels, split the same way on every rank (fixed seed)."""
    digits = load_digits()
    features = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int32)
    order = np.random.RandomState(SEED).permutation(len(labels))
    cut = int(len(labels) * (1 - validation_fraction))
    return ((features[order[:cut]], labels[order[:cut]]),
            (features[order[cut:]], labels[order[cut:]]))


def shard(arrays, rank, size):
    """This rank's share: every size-th sample, starting at its rank."""
    return tuple(a[rank::size] for a in arrays)


class EpochReport(keras.callbacks.Callback):
    """Rank 0 prints the (rank-averaged) metrics of every epoch."""

    def on_epoch_end(self, epoch, logs=None):
        if hvd.rank() == 0:
            print("epoch %d: loss %.4f, accuracy %.4f, validation accuracy %.4f"
                  % (epoch + 1, logs["loss"], logs["accuracy"], logs["val_accuracy"]),
                  flush=True)


def main():
    args = parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    print("rank %d/%d (%s)" % (rank, size, hvd.controller()), flush=True)
    (train_x, train_y), (val_x, val_y) = load_split()
    train_x, train_y = shard((train_x, train_y), rank, size)
    val_x, val_y = shard((val_x, val_y), rank, size)

    keras.utils.set_random_seed(SEED + rank)  # different on purpose: the broadcast fixes it
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation="relu"),
                              keras.layers.Dense(10)])
    learning_rate = args.lr * size
    optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(learning_rate, momentum=0.9))
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"],
                  jit_compile=False)  # XLA cannot compile tutti's ops (Keras uses it on GPUs)
    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(root_rank=0),
        # Before EpochReport: it prints the averaged values.
        hvd.callbacks.MetricAverageCallback(),
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=learning_rate,
                                                 warmup_epochs=args.warmup_epochs),
        EpochReport(),
    ]
    history = model.fit(train_x, train_y, batch_size=args.batch_size, epochs=args.epochs,
                        validation_data=(val_x, val_y), callbacks=callbacks, verbose=0)

    # Every rank must hold the same weights after training.
    weights = np.concatenate([w.ravel() for w in model.get_weights()])
    root_weights = hvd.broadcast(tf.constant(weights), root_rank=0).numpy()
    agree = bool(hvd.allreduce(tf.constant(float(np.array_equal(weights, root_weights))),
                               op=hvd.Min))
    accuracy = history.history["val_accuracy"][-1]
    if rank == 0:
        print("validation accuracy %.4f on %d ranks; weights %s across ranks"
              % (accuracy, size, "agree" if agree else "DIFFER"), flush=True)
    return 0 if agree and accuracy >= args.target_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
