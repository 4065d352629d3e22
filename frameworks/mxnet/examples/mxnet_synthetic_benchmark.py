"""Synthetic-data training throughput of tutti's DistributedTrainer against one rank and
against MXNet's own single-process data parallelism (kvstore 'local'), in one run.

    mpirun -np 2 python mxnet_synthetic_benchmark.py --model cnn
    tuttirun -np 2 python mxnet_synthetic_benchmark.py --model mlp --batch-size 16

Phases, all in the same job:
  1. every rank trains on its own synthetic batches with hvd.DistributedTrainer;
  2. rank 0 alone trains the same model with a DistributedTrainer on a process set of
     just itself (tutti at 1 rank: no reduction), while the other ranks wait;
  3. rank 0 alone trains with gluon.Trainer(kvstore='local') on N CPU contexts in one
     process, each context taking one rank's batch (the baseline MXNet users would
     otherwise use on one machine).
Rank 0 prints images/s of each phase (mean +- 1.96 standard deviations over the
iterations), the scaling efficiency (phase 1 / (N x phase 2)) and the ratio of phase 1 to
phase 3. Each rank, and each context of phase 3, gets one engine worker thread and one
OpenMP thread (MXNET_CPU_WORKER_NTHREADS=1, OMP_NUM_THREADS=1 unless set), so N ranks fit
N cores.
"""

import argparse
import os
import resource
import sys
import time

# One thread per rank; must be set before MXNet starts its engine.
os.environ.setdefault("MXNET_CPU_WORKER_NTHREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import tutti.mxnet as hvd  # noqa: E402  (first: it also lets MXNet 1.9 import with numpy 1.26)

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402
from mxnet import autograd, gluon  # noqa: E402


def cnn():
    """Compute-bound: convolutions on 3x32x32 images, 0.1 M parameters."""
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(32, 3, padding=1, activation="relu"),
            gluon.nn.Conv2D(64, 3, strides=2, padding=1, activation="relu"),
            gluon.nn.Conv2D(128, 3, strides=2, padding=1, activation="relu"),
            gluon.nn.GlobalAvgPool2D(),
            gluon.nn.Dense(10))
    return net, (3, 32, 32)


def mlp():
    """Communication-bound: 1.9 M parameters (7.6 MB of float32 gradients) and little
    arithmetic per sample."""
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(1024, activation="relu"),
            gluon.nn.Dense(1024, activation="relu"),
            gluon.nn.Dense(10))
    return net, (784,)


MODELS = {"cnn": cnn, "mlp": mlp}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="cnn")
    parser.add_argument("--batch-size", type=int, default=32, help="images per step and rank")
    parser.add_argument("--num-warmup-batches", type=int, default=5,
                        help="steps before timing starts")
    parser.add_argument("--num-batches-per-iter", type=int, default=5,
                        help="steps per timed iteration")
    parser.add_argument("--num-iters", type=int, default=10, help="timed iterations")
    parser.add_argument("--num-groups", type=int, default=0,
                        help="DistributedTrainer num_groups (0: one request per gradient)")
    parser.add_argument("--fp16-allreduce", action="store_true",
                        help="send gradients as float16 (hvd.Compression.fp16)")
    return parser.parse_args()


def build(args, contexts):
    net, shape = MODELS[args.model]()
    net.initialize(mx.init.Xavier(), ctx=contexts)
    net.hybridize()
    # Run once so that deferred shapes exist before the trainer sees the parameters.
    for ctx in contexts:
        net(mx.nd.zeros((1,) + shape, ctx=ctx)).wait_to_read()
    return net, shape


def synthetic_batch(shape, batch, ctx, seed):
    rng = np.random.RandomState(seed)
    data = mx.nd.array(rng.uniform(-1, 1, (batch,) + shape), ctx=ctx)
    label = mx.nd.array(rng.randint(0, 10, batch), ctx=ctx)
    return data, label


def timed(args, step):
    """Images/s of each timed iteration of `step` (which trains on one batch per context
    and returns the number of images)."""
    for _ in range(args.num_warmup_batches):
        step()
    mx.nd.waitall()
    rates = []
    for _ in range(args.num_iters):
        start = time.perf_counter()
        images = sum(step() for _ in range(args.num_batches_per_iter))
        mx.nd.waitall()
        rates.append(images / (time.perf_counter() - start))
    return np.array(rates)


def run_trainer(args, trainer_factory, contexts, seed):
    """Trains on len(contexts) batches per step (one per context) and returns the rates."""
    net, shape = build(args, contexts)
    trainer = trainer_factory(net.collect_params())
    batches = [synthetic_batch(shape, args.batch_size, ctx, seed + i)
               for i, ctx in enumerate(contexts)]
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def step():
        with autograd.record():
            losses = [loss_fn(net(data), label) for data, label in batches]
        autograd.backward(losses)
        trainer.step(args.batch_size * len(contexts))
        return args.batch_size * len(contexts)

    return timed(args, step)


def summary(rates):
    return "%9.1f +- %6.1f img/s" % (rates.mean(), 1.96 * rates.std())


def main():
    args = parse_args()
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    optimizer = ("sgd", {"learning_rate": 0.01, "momentum": 0.9})
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none

    # 1. All ranks, tutti. Every rank's rate is its own images/s; the job's is their sum.
    distributed = run_trainer(args, lambda params: hvd.DistributedTrainer(
        params, *optimizer, compression=compression, num_groups=args.num_groups),
        [mx.cpu()], seed=rank)
    total = hvd.allreduce(mx.nd.array(distributed, dtype="float64"), op=hvd.Sum,
                          name="bench.total").asnumpy()

    # 2 and 3. Rank 0 alone; the others wait in the broadcast of the results.
    alone = hvd.add_process_set([0])
    waited = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    if rank == 0:
        one_rank = run_trainer(args, lambda params: hvd.DistributedTrainer(
            params, *optimizer, process_set=alone), [mx.cpu()], seed=0)
        local = run_trainer(args, lambda params: gluon.Trainer(
            params, *optimizer, kvstore="local"), [mx.cpu(i) for i in range(size)], seed=0)
        results = (one_rank, local)
    else:
        results = None
    start = time.perf_counter()
    one_rank, local = hvd.broadcast_object(results, root_rank=0, name="bench.results")
    idle_cpu = hvd.allgather_object(
        (time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_utime - waited),
        name="bench.idle")

    if rank == 0:
        controller = "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else "local"
        print("model %s, batch %d per rank, %d iterations x %d batches (%d warm-up), "
              "%d rank(s) over %s, MXNET_CPU_WORKER_NTHREADS=%s OMP_NUM_THREADS=%s"
              % (args.model, args.batch_size, args.num_iters, args.num_batches_per_iter,
                 args.num_warmup_batches, size, controller,
                 os.environ["MXNET_CPU_WORKER_NTHREADS"], os.environ["OMP_NUM_THREADS"]))
        print("tutti DistributedTrainer, %d ranks:          %s" % (size, summary(total)))
        print("tutti DistributedTrainer, 1 rank:           %s" % summary(one_rank))
        print("MXNet kvstore='local', 1 process, %d ctxs:   %s" % (size, summary(local)))
        print("scaling efficiency (tutti %d ranks / %d x 1 rank): %.2f"
              % (size, size, total.mean() / (size * one_rank.mean())))
        print("tutti %d ranks / MXNet local kvstore:        %.2f"
              % (size, total.mean() / local.mean()))
        for other, (wall, cpu) in enumerate(idle_cpu[1:], start=1):
            print("rank %d waited %.1f s for the single-process phases, using %.1f s of CPU"
                  % (other, wall, cpu))
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
