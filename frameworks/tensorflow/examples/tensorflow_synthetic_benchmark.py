"""Synthetic-data training throughput: tutti's DistributedGradientTape against TensorFlow's
own MultiWorkerMirroredStrategy in the same launch, and against one rank alone.

    mpirun -np 2 python tensorflow_synthetic_benchmark.py --model cnn
    tuttirun -np 2 python tensorflow_synthetic_benchmark.py --model mlp --batch-size 64

Every rank runs one intra-op and one inter-op thread. The run has three parts:
1. baseline: rank 0 trains the model alone, without any communication, while the other
   ranks wait (measured before and after the distributed parts; the mean is used);
2. the distributed parts: each timed iteration runs --num-batches-per-iter batches with
   tutti (hvd.DistributedGradientTape, the step compiled with tf.function) and then the
   same number with tf.distribute.MultiWorkerMirroredStrategy (gRPC ring all-reduce),
   alternating, so that both see the same machine load;
3. a summary: images/s per rank (mean and 95% interval over iterations), the job's total,
   tutti / MultiWorkerMirroredStrategy, and scaling efficiency = total / (ranks x the
   baseline's images/s).

The strategy needs its cluster (TF_CONFIG) before TensorFlow runs its first op, so the
ranks exchange free ports through tutti.numpy first. Models are defined here:
  cnn  compute-bound: 4 convolutions on 32x32x3 images, 0.24 M parameters
  mlp  communication-bound: 3 dense layers on 1024 features, 6.3 M parameters
"""

import argparse
import json
import os
import socket
import statistics
import time

import numpy as np
import tensorflow as tf

import keras
import tutti.numpy as tnp
import tutti.tensorflow as hvd


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="cnn", choices=sorted(MODELS), help="model to train")
    parser.add_argument("--batch-size", type=int, default=32, help="images per batch and rank")
    parser.add_argument("--num-warmup-batches", type=int, default=5,
                        help="untimed batches before each measurement")
    parser.add_argument("--num-batches-per-iter", type=int, default=5,
                        help="batches per timed iteration")
    parser.add_argument("--num-iters", type=int, default=10, help="timed iterations")
    parser.add_argument("--fp16-allreduce", action="store_true",
                        help="tutti: reduce gradients as float16 (Compression.fp16)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the 1-rank baseline")
    parser.add_argument("--no-mwms", action="store_true",
                        help="skip MultiWorkerMirroredStrategy")
    return parser.parse_args()


def cnn():
    return keras.Sequential([
        keras.Input((32, 32, 3)),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.Conv2D(64, 3, strides=2, padding="same", activation="relu"),
        keras.layers.Conv2D(128, 3, strides=2, padding="same", activation="relu"),
        keras.layers.Conv2D(128, 3, padding="same", activation="relu"),
        keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10)])


def mlp():
    return keras.Sequential([
        keras.Input((1024,)), keras.layers.Dense(2048, activation="relu"),
        keras.layers.Dense(2048, activation="relu"), keras.layers.Dense(10)])


MODELS = {"cnn": (cnn, (32, 32, 3)), "mlp": (mlp, (1024,))}


def synthetic_batch(args):
    _, shape = MODELS[args.model]
    rng = np.random.RandomState(0)
    data = rng.randn(args.batch_size, *shape).astype(np.float32)
    target = rng.randint(0, 10, size=(args.batch_size,)).astype(np.int32)
    return tf.constant(data), tf.constant(target)


def loss_of(model, data, target):
    return tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
        target, model(data, training=True), from_logits=True))


class Trainer:
    """A compiled training step over one synthetic batch; run(n) trains n batches."""

    def __init__(self, step):
        self.step = step

    def run(self, batches):
        for _ in range(batches):
            loss = self.step()
        float(loss)  # wait for the last step


def plain_trainer(args):
    keras.utils.set_random_seed(0)
    model, optimizer = MODELS[args.model][0](), keras.optimizers.SGD(0.01)
    data, target = synthetic_batch(args)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = loss_of(model, data, target)
        optimizer.apply(tape.gradient(loss, model.trainable_variables),
                        model.trainable_variables)
        return loss

    return Trainer(step)


def tutti_trainer(args):
    keras.utils.set_random_seed(0)
    model, optimizer = MODELS[args.model][0](), keras.optimizers.SGD(0.01)
    hvd.broadcast_variables(model.variables, root_rank=0)
    data, target = synthetic_batch(args)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = loss_of(model, data, target)
        tape = hvd.DistributedGradientTape(tape, compression=compression)
        optimizer.apply(tape.gradient(loss, model.trainable_variables),
                        model.trainable_variables)
        return loss

    return Trainer(step)


def start_strategy():
    """MultiWorkerMirroredStrategy over the ranks tutti knows: one worker per rank on this
    host, each listening on a free port. Must run before TensorFlow's first op."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ports = tnp.allgather(np.array([port], np.int64), name="mwms.ports")
    os.environ["TF_CONFIG"] = json.dumps({
        "cluster": {"worker": ["127.0.0.1:%d" % p for p in ports]},
        "task": {"type": "worker", "index": hvd.rank()},
    })
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def strategy_trainer(args, strategy):
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model, optimizer = MODELS[args.model][0](), keras.optimizers.SGD(0.01)
    data, target = synthetic_batch(args)

    def replica_step():
        with tf.GradientTape() as tape:
            # The strategy sums the replicas' gradients: scale for the average.
            loss = loss_of(model, data, target) / strategy.num_replicas_in_sync
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables))
        return loss

    @tf.function
    def step():
        return strategy.reduce("SUM", strategy.run(replica_step), axis=None)

    return Trainer(step)


def images_per_second(args, seconds):
    return args.batch_size * args.num_batches_per_iter / seconds


def measure_alone(args, trainer):
    """Rank 0's images/s training alone; the other ranks wait in a barrier."""
    rate = None
    if hvd.rank() == 0:
        trainer.run(args.num_warmup_batches)
        times = []
        for _ in range(args.num_iters):
            start = time.perf_counter()
            trainer.run(args.num_batches_per_iter)
            times.append(time.perf_counter() - start)
        rate = images_per_second(args, statistics.median(times))
    hvd.barrier()
    return rate


def summary(label, rates):
    """Mean and 95% interval of this rank's images/s, and the job's total."""
    mean = statistics.mean(rates)
    spread = 1.96 * statistics.stdev(rates) if len(rates) > 1 else 0.0
    total = float(hvd.allreduce(tf.constant(mean, tf.float64), op=hvd.Sum,
                                name="total." + label))
    return mean, spread, total


def main():
    args = parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    strategy = None
    if not args.no_mwms:
        strategy = start_strategy()  # before any other TensorFlow op
    log = (lambda text: print(text, flush=True)) if rank == 0 else (lambda text: None)
    log("model %s, batch size %d per rank, %d ranks (%s), 1 intra-op and 1 inter-op thread "
        "per rank" % (args.model, args.batch_size, size, hvd.controller()))

    alone = []
    if not args.no_baseline:
        baseline = plain_trainer(args)
        alone.append(measure_alone(args, baseline))

    runs = {"tutti": tutti_trainer(args)}
    if strategy is not None:
        runs["mwms"] = strategy_trainer(args, strategy)
    for trainer in runs.values():
        trainer.run(args.num_warmup_batches)
    rates = {label: [] for label in runs}
    for _ in range(args.num_iters):
        for label, trainer in runs.items():
            start = time.perf_counter()
            trainer.run(args.num_batches_per_iter)
            rates[label].append(images_per_second(args, time.perf_counter() - start))

    if not args.no_baseline:
        alone.append(measure_alone(args, baseline))
    results = {label: summary(label, r) for label, r in rates.items()}
    if rank == 0:
        single = statistics.mean(alone) if alone else None
        if single:
            log("1 rank alone: %.1f img/s (before %.1f, after %.1f)" % (single, *alone))
        names = {"tutti": "tutti DistributedGradientTape", "mwms": "MultiWorkerMirroredStrategy"}
        for label, (mean, spread, total) in results.items():
            line = "%-29s %.1f +-%.1f img/s per rank, total %.1f img/s" % (
                names[label] + ":", mean, spread, total)
            if single:
                line += ", scaling efficiency %.1f%%" % (100.0 * total / (size * single))
            log(line)
        if "mwms" in results:
            log("tutti / MultiWorkerMirroredStrategy throughput: %.3f"
                % (results["tutti"][2] / results["mwms"][2]))


if __name__ == "__main__":
    main()
