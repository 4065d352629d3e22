"""Synthetic-data training throughput of tutti's DistributedTrainer against one rank,
against MXNet's own single-process data parallelism (kvstore 'local'), against the
compute-only bound and, with --peers horovod, against Horovod 0.28.1, in one run.

    mpirun -np 2 python mxnet_synthetic_benchmark.py --model cnn
    tuttirun -np 2 python mxnet_synthetic_benchmark.py --model mlp --batch-size 16
    mpirun -np 2 python mxnet_synthetic_benchmark.py --model cnn --peers horovod

Phases, all in the same job:
  1. every rank trains on its own synthetic batches with hvd.DistributedTrainer, taking
     turns iteration by iteration with the compute-only bound (every rank at once with a
     plain gluon.Trainer, no kvstore: every collective removed) and, with --peers horovod,
     with Horovod's DistributedTrainer in Horovod's own jobs over MPI (mpirun) and Gloo
     (horovodrun --gloo), run from this script under the Python of the Horovod benchmark
     environment (tools/bench/horovod-env, or TUTTI_HOROVOD_VENV) and frozen while
     another job runs (tools/bench/peers.py; run from the source tree);
  2. rank 0 alone trains the same model with a DistributedTrainer on a process set of
     just itself (tutti at 1 rank: no reduction), while the other ranks wait;
  3. rank 0 alone trains with gluon.Trainer(kvstore='local') on N CPU contexts in one
     process, each context taking one rank's batch (the baseline MXNet users would
     otherwise use on one machine).
Rank 0 prints images/s of each phase (mean +- 1.96 standard deviations over the
iterations; a job's images/s in an iteration are all its ranks' images over the time until
the slowest rank finished), the scaling efficiency (phase 1 / (N x phase 2)), the ratio of phase 1 to
phase 3, the efficiency against the compute-only bound and tutti / Horovod. Each rank,
and each context of phase 3, gets one engine worker thread and one
OpenMP thread (MXNET_CPU_WORKER_NTHREADS=1, OMP_NUM_THREADS=1 unless set), so N ranks fit
N cores.
"""

import argparse
import contextlib
import importlib
import json
import os
import resource
import sys
import time

# One thread per rank; must be set before MXNet starts its engine.
os.environ.setdefault("MXNET_CPU_WORKER_NTHREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

# This script is also Horovod's peer job under --peers horovod (an internal flag says so):
# Horovod's API is tutti's. First: tutti.mxnet also lets MXNet 1.9 import with numpy 1.26.
# And, with no communication library at all, one rank of the compute-only job.
PEER_FLAG = "--as-horovod-peer"
COMPUTE_FLAG = "--as-compute-peer"
hvd = (importlib.import_module("horovod.mxnet") if PEER_FLAG in sys.argv else
       None if COMPUTE_FLAG in sys.argv else importlib.import_module("tutti.mxnet"))
BENCH_TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                           "tools", "bench")

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
    parser.add_argument("--peers", choices=["horovod"], default=None,
                        help="also measure Horovod 0.28.1 (MPI and Gloo) in the same launch")
    parser.add_argument("--json", default=None, help="rank 0 writes the figures here")
    parser.add_argument(PEER_FLAG, dest="peer_controller", choices=["mpi", "gloo"],
                        help=argparse.SUPPRESS)
    parser.add_argument(COMPUTE_FLAG, dest="compute_rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--compute-size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--peers-dir", help=argparse.SUPPRESS)
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


def warm_up(args, step):
    for _ in range(args.num_warmup_batches):
        step()
    mx.nd.waitall()


def timed_iteration(args, step):
    """Images/s of one timed iteration of `step` (which trains on one batch per context
    and returns the number of images)."""
    start = time.perf_counter()
    images = sum(step() for _ in range(args.num_batches_per_iter))
    mx.nd.waitall()
    return images / (time.perf_counter() - start)


def timed(args, step):
    """Images/s of each timed iteration of `step`."""
    warm_up(args, step)
    return np.array([timed_iteration(args, step) for _ in range(args.num_iters)])


def run_trainer(args, trainer_factory, contexts, seed):
    """Trains on len(contexts) batches per step (one per context) and returns the rates."""
    return timed(args, make_step(args, trainer_factory, contexts, seed))


def make_step(args, trainer_factory, contexts, seed):
    """One training step on len(contexts) batches (one per context)."""
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

    return step


def summary(rates):
    return "%9.1f +- %6.1f img/s" % (rates.mean(), 1.96 * rates.std())


def load_peers():
    """tools/bench/peers.py (turn-taking with Horovod's jobs)."""
    if not os.path.exists(os.path.join(BENCH_TOOLS, "peers.py")):
        raise SystemExit("--peers horovod needs tools/bench/peers.py: run this script from "
                         "tutti's source tree")
    sys.path.insert(0, os.path.abspath(BENCH_TOOLS))
    import peers

    return peers


def peer_argv(controller, directory):
    """The command line of Horovod's job: this script with the same settings."""
    return own_argv() + [PEER_FLAG, controller, "--peers-dir", directory]


def compute_argv(size):
    """The command line of one rank of the compute-only job."""
    return lambda rank, directory: own_argv() + [COMPUTE_FLAG, str(rank), "--compute-size",
                                                 str(size), "--peers-dir", directory]


def own_argv():
    """This script and its settings, without the options of the coordinating job."""
    argv, skip = [], False
    for arg in sys.argv[1:]:
        if skip:
            skip = False
        elif arg in ("--peers", "--json"):
            skip = True
        elif not arg.startswith(("--peers=", "--json=")):
            argv.append(arg)
    return [os.path.abspath(__file__)] + argv


def barrier():
    hvd.allreduce(mx.nd.zeros(1), name="bench.barrier").wait_to_read()


def distributed_phase(args, steps, baton, barrier=barrier):
    """Phase 1: the steps take turns iteration by iteration (the order rotating), one
    turn of the launch each iteration; returns {label: rates}."""
    def turn():
        return baton.turn() if baton else contextlib.nullcontext()

    with turn():
        for step in steps.values():
            warm_up(args, step)
    rates = {label: [] for label in steps}
    labels = list(steps)
    for iteration in range(args.num_iters):
        with turn():
            shift = iteration % len(labels)
            for label in labels[shift:] + labels[:shift]:
                barrier()  # all ranks start together (compute-only meets nowhere else)
                rates[label].append(timed_iteration(args, steps[label]))
    return {label: np.array(r) for label, r in rates.items()}


def run_as_compute_peer(args, optimizer):
    """One rank of the compute-only job: phase 1 with a plain gluon.Trainer, no
    communication library in the process, taking turns like the other jobs."""
    peers = load_peers()
    rank, job = args.compute_rank, peers.COMPUTE_ONLY
    barrier = peers.FileBarrier(args.peers_dir, job, rank, args.compute_size)
    baton = peers.Baton(args.peers_dir, job, rank, barrier)
    steps = {job: make_step(args, lambda params: gluon.Trainer(params, *optimizer, kvstore=None),
                            [mx.cpu()], seed=rank)}
    baton.ready()
    rates = distributed_phase(args, steps, baton, barrier)[job]
    peers.write_result(args.peers_dir, "%s-%d" % (job, rank), {"rates": rates.tolist()})
    return 0


def job_rates(rates, name):
    """The job's images/s per iteration: every rank's images over the time until the slowest
    rank finished (the ranks start each iteration together and train the same number of
    images, so: ranks x the slowest rank's rate). A rank that finishes early leaves the
    machine to the others for the rest of the iteration; the sum of the ranks' own rates
    would count that, which no synchronous job can have."""
    slowest = hvd.allreduce(mx.nd.array(rates, dtype="float64"), op=hvd.Min, name=name)
    return slowest.asnumpy() * hvd.size()


def run_as_peer(args, optimizer, compression):
    """Horovod's job: phase 1 with Horovod's DistributedTrainer, then the figures to the
    coordinating rank."""
    peers = load_peers()
    hvd.init()
    job = "horovod-" + args.peer_controller
    baton = peers.Baton(args.peers_dir, job, hvd.rank(), barrier)
    steps = {job: make_step(args, lambda params: hvd.DistributedTrainer(
        params, *optimizer, compression=compression, num_groups=args.num_groups),
        [mx.cpu()], seed=hvd.rank())}
    baton.ready()
    rates = distributed_phase(args, steps, baton)[job]
    total = job_rates(rates, "bench.total")
    if hvd.rank() == 0:
        import horovod

        peers.write_result(args.peers_dir, job, {"total": total.tolist(),
                                                 "version": horovod.__version__})
    hvd.shutdown()
    return 0


def main():
    args = parse_args()
    optimizer = ("sgd", {"learning_rate": 0.01, "momentum": 0.9})
    if args.compute_rank is not None:
        return run_as_compute_peer(args, optimizer)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    if args.peer_controller:
        return run_as_peer(args, optimizer, compression)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()

    # With peers, rank 0 starts Horovod's jobs and hands out the turns: one for the
    # warm-up, one per timed iteration.
    horovod, baton = None, None
    if args.peers:
        peers = load_peers()
        directory = None
        if rank == 0:
            try:
                horovod = peers.HorovodPeers(size, peer_argv, args.num_iters + 1,
                                             compute_argv=compute_argv(size))
                directory = horovod.directory
            except peers.PeerSetupError as exc:
                directory = "error: %s" % exc
        directory = hvd.broadcast_object(directory, root_rank=0, name="peers.dir")
        if directory.startswith("error: "):
            raise SystemExit(directory[len("error: "):])
        baton = peers.Baton(directory, "tutti", rank, barrier)

    # 1. All ranks: tutti and the compute-only bound. Every rank's rate is its own
    # images/s; the job's is job_rates() (and, for comparison, the bound as their sum).
    steps = {"tutti": make_step(args, lambda params: hvd.DistributedTrainer(
        params, *optimizer, compression=compression, num_groups=args.num_groups),
        [mx.cpu()], seed=rank),
        "compute-only": make_step(args, lambda params: gluon.Trainer(
            params, *optimizer, kvstore=None), [mx.cpu()], seed=rank)}
    if baton:
        baton.ready()
    phase1 = distributed_phase(args, steps, baton)
    distributed = phase1["tutti"]
    total = job_rates(distributed, "bench.total")
    bound = job_rates(phase1["compute-only"], "bench.bound")
    bound_sum = hvd.allreduce(mx.nd.array(phase1["compute-only"], dtype="float64"), op=hvd.Sum,
                              name="bench.bound_sum").asnumpy()
    peer_totals, compute_job = {}, None
    if horovod is not None:
        for job, peer in horovod.finish().items():
            if isinstance(peer, list):  # the compute-only job: each rank's rates
                compute_job = len(peer) * np.min([np.array(r["rates"]) for r in peer], axis=0)
            else:
                peer_totals[job] = (np.array(peer["total"]), peer["version"])

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
        print("compute-only bound, %d ranks:                %s" % (size, summary(bound)))
        print("tutti / compute-only bound:                  %.3f" % (total.mean() / bound.mean()))
        print("tutti / the bound as the sum of the ranks' own rates (each rank timed to its "
              "own end): %.3f" % (total.mean() / bound_sum.mean()))
        if compute_job is not None:
            print("compute-only job (no communication library): %s" % summary(compute_job))
            print("tutti / compute-only job:                    %.3f"
                  % (total.mean() / compute_job.mean()))
        for job, (peer_total, version) in peer_totals.items():
            mode = {"horovod-mpi": "MPI", "horovod-gloo": "Gloo"}[job]
            print("%-48s%s" % ("Horovod %s DistributedTrainer (%s), %d ranks:"
                               % (version, mode, size), summary(peer_total)))
            print("%-48s%.3f" % ("tutti / Horovod (%s):" % mode,
                                 total.mean() / peer_total.mean()))
        if args.json:
            figures = {"tutti": total, "one-rank": one_rank, "local-kvstore": local,
                       "compute-only": bound}
            figures.update({job: t for job, (t, _) in peer_totals.items()})
            if compute_job is not None:
                figures["compute-only-job"] = compute_job
            with open(args.json, "w") as stream:
                json.dump({"model": args.model, "batch_size": args.batch_size, "ranks": size,
                           "controller": controller, "argv": sys.argv,
                           "peer_versions": {j: v for j, (_, v) in peer_totals.items()},
                           "loadavg_1m_after": os.getloadavg()[0],
                           "images_per_s": {k: {"mean": float(v.mean()),
                                                "sd": float(v.std()),
                                                "iterations": [float(x) for x in v]}
                                            for k, v in figures.items()}}, stream, indent=1)
        for other, (wall, cpu) in enumerate(idle_cpu[1:], start=1):
            print("rank %d waited %.1f s for the single-process phases, using %.1f s of CPU"
                  % (other, wall, cpu))
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
