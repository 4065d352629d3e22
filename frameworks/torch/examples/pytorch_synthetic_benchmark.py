"""Synthetic-data training throughput: tutti's DistributedOptimizer against PyTorch's
DistributedDataParallel (Gloo backend) in the same launch, against the compute-only bound,
against one rank alone and, with --peers horovod, against Horovod 0.28.1.

    mpirun -np 2 python pytorch_synthetic_benchmark.py --model cnn
    tuttirun -np 2 python pytorch_synthetic_benchmark.py --model mlp --batch-size 64
    mpirun -np 2 python pytorch_synthetic_benchmark.py --model cnn --peers horovod

Every rank runs one compute thread (torch.set_num_threads(1)). The run has three parts:
1. baseline: rank 0 trains the model alone, without any communication, while the other
   ranks wait (measured before and after the distributed parts; the mean is used);
2. the distributed parts: each timed iteration runs --num-batches-per-iter batches with
   tutti's DistributedOptimizer, the same number with DDP, and the same number with a
   plain optimizer on every rank at once ("compute-only": every collective removed, so the
   machine's own contention between the ranks is not counted against the others), taking
   turns (the order rotates each iteration) so that all see the same machine load;
3. a summary: images/s per rank (median and quartiles over the iterations), the job's
   total (median over the iterations of all ranks' images over the time until the last
   rank finished: the ranks start each iteration together, and a rank that finishes
   early leaves the machine to the others, which a synchronous job never does), tutti /
   DDP, the efficiency against the
   compute-only bound (total / compute-only total) and the scaling efficiency =
   total / (ranks x the baseline's images/s; median of its iterations, mean of before
   and after).

--peers horovod: rank 0 also starts this script twice under the Python of the Horovod
benchmark environment (tools/bench/horovod-env, or TUTTI_HOROVOD_VENV), as Horovod jobs
over MPI (mpirun) and over Gloo (horovodrun --gloo) with the same model, batch and
DistributedOptimizer; the jobs take turns with this one iteration by iteration, each frozen
while another runs (tools/bench/peers.py), and their rows join the summary. The script must
be run from the source tree (it needs tools/bench).

DDP's process group is started with init_method="env://": MASTER_ADDR and MASTER_PORT are
taken from the environment when the launcher sets them, else 127.0.0.1 and a free port
chosen by rank 0 (single-host jobs). Models are defined here (no torchvision):
  cnn  compute-bound: 4 convolutions on 3x32x32 images, 0.24 M parameters
  mlp  communication-bound: 3 linear layers on 1024 features, 6.3 M parameters
"""

import argparse
import contextlib
import importlib
import json
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

# This script is also Horovod's peer job under --peers horovod (an internal flag says so):
# Horovod's API is tutti's, so the very same code trains with either.
# And, with no communication library at all, one rank of the compute-only job.
PEER_FLAG = "--as-horovod-peer"
COMPUTE_FLAG = "--as-compute-peer"
hvd = (importlib.import_module("horovod.torch") if PEER_FLAG in sys.argv else
       None if COMPUTE_FLAG in sys.argv else importlib.import_module("tutti.torch"))
BENCH_TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                           "tools", "bench")


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
    parser.add_argument("--no-ddp", action="store_true", help="skip DistributedDataParallel")
    parser.add_argument("--no-compute-only", action="store_true",
                        help="skip the compute-only bound")
    parser.add_argument("--peers", choices=["horovod"], default=None,
                        help="also measure Horovod 0.28.1 (MPI and Gloo) in the same launch")
    parser.add_argument("--json", default=None, help="rank 0 writes the figures here")
    parser.add_argument(PEER_FLAG, dest="peer_controller", choices=["mpi", "gloo"],
                        help=argparse.SUPPRESS)
    parser.add_argument(COMPUTE_FLAG, dest="compute_rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--compute-size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--peers-dir", help=argparse.SUPPRESS)
    return parser.parse_args()


def cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(64, 128, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(128, 128, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(128, 10))


def mlp():
    return torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(1024, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 10))


MODELS = {"cnn": (cnn, (3, 32, 32)), "mlp": (mlp, (1024,))}


class Trainer:
    """One model, optimizer and synthetic batch; run(n) trains n batches."""

    def __init__(self, model, optimizer, data, target):
        self.model, self.optimizer, self.data, self.target = model, optimizer, data, target

    def run(self, batches):
        for _ in range(batches):
            self.optimizer.zero_grad()
            F.cross_entropy(self.model(self.data), self.target).backward()
            self.optimizer.step()


def make_trainer(args, wrap):
    build, shape = MODELS[args.model]
    torch.manual_seed(0)
    model = build()
    data = torch.randn((args.batch_size,) + shape)
    target = torch.randint(0, 10, (args.batch_size,))
    model, optimizer = wrap(model)
    return Trainer(model, optimizer, data, target)


def plain(model):
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def tutti_wrap(args):
    def wrap(model):
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        optimizer = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.01),
            named_parameters=model.named_parameters(),
            compression=hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none)
        return model, optimizer
    return wrap


def ddp_wrap(model):
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    return ddp, torch.optim.SGD(ddp.parameters(), lr=0.01)


def start_ddp():
    """Gloo process group over the ranks tutti knows (rank 0 hosts the rendezvous)."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        port = None
        if hvd.rank() == 0:
            with socket.socket() as probe:
                probe.bind(("", 0))
                port = probe.getsockname()[1]
        os.environ["MASTER_PORT"] = str(hvd.broadcast_object(port, 0, name="ddp.port"))
    dist.init_process_group("gloo", init_method="env://", rank=hvd.rank(),
                            world_size=hvd.size())


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


def time_iteration(args, trainer, barrier=None):
    # Every rank starts together (the compute-only ranks meet nowhere else).
    (barrier or hvd.barrier)()
    start = time.perf_counter()
    trainer.run(args.num_batches_per_iter)
    return images_per_second(args, time.perf_counter() - start)


def run_as_peer(args):
    """Horovod's job: warm-up in the first turn, one timed iteration per turn, then the
    figures to the coordinating rank."""
    peers = load_peers()
    hvd.init()
    torch.set_num_threads(1)
    job = "horovod-" + args.peer_controller
    baton = peers.Baton(args.peers_dir, job, hvd.rank(), hvd.barrier)
    trainer = make_trainer(args, tutti_wrap(args))
    baton.ready()
    with baton.turn():
        trainer.run(args.num_warmup_batches)
    rates = []
    for _ in range(args.num_iters):
        with baton.turn():
            rates.append(time_iteration(args, trainer))
    with baton.turn():
        pass  # the other jobs' final baseline
    figures = summary(args, job, rates)
    if hvd.rank() == 0:
        import horovod

        peers.write_result(args.peers_dir, job, {"figures": figures,
                                                 "version": horovod.__version__})
    hvd.shutdown()


def run_as_compute_peer(args):
    """One rank of the compute-only job: the same model trained with a plain optimizer, no
    communication library in the process, taking turns like the other jobs."""
    peers = load_peers()
    torch.set_num_threads(1)
    rank, job = args.compute_rank, peers.COMPUTE_ONLY
    barrier = peers.FileBarrier(args.peers_dir, job, rank, args.compute_size)
    baton = peers.Baton(args.peers_dir, job, rank, barrier)
    trainer = make_trainer(args, plain)
    baton.ready()
    with baton.turn():
        trainer.run(args.num_warmup_batches)
    rates = []
    for _ in range(args.num_iters):
        with baton.turn():
            rates.append(time_iteration(args, trainer, barrier))
    with baton.turn():
        pass
    peers.write_result(args.peers_dir, "%s-%d" % (job, rank), {"rates": rates})


def summary(args, label, rates):
    """This rank's median images/s and the 25th-75th percentile range over the timed
    iterations (medians resist the bursts of other load on a shared machine), the job's
    total and, for comparison, the sum of the ranks' medians."""
    quartiles = statistics.quantiles(rates, n=4) if len(rates) > 1 else [rates[0]] * 3
    median = statistics.median(rates)
    slowest = hvd.allreduce(torch.tensor(rates, dtype=torch.float64), op=hvd.Min,
                            name="slowest." + label).tolist()
    medians = hvd.allreduce(torch.tensor(median, dtype=torch.float64), op=hvd.Sum,
                            name="total." + label).item()
    return median, (quartiles[0], quartiles[2]), job_total(slowest, hvd.size()), medians


def job_total(slowest, ranks):
    """The job's images/s: per iteration, every rank's images over the time until the
    slowest rank finished (they started together and train the same number of images, so
    that is `ranks` x the slowest rank's rate), median over the iterations. A rank that
    finishes early leaves the machine to the others for the rest of the iteration; the
    sum of the ranks' own rates would count that, which no synchronous job can have."""
    return ranks * statistics.median(slowest)


NAMES = {"tutti": "tutti DistributedOptimizer", "ddp": "torch DDP (gloo)",
         "horovod-mpi": "Horovod 0.28.1 (MPI)", "horovod-gloo": "Horovod 0.28.1 (Gloo)",
         "compute-only": "compute-only bound",
         "compute-only-job": "compute-only job"}


def main():
    args = parse_args()
    if args.peer_controller:
        return run_as_peer(args)
    if args.compute_rank is not None:
        return run_as_compute_peer(args)
    hvd.init()
    torch.set_num_threads(1)
    rank, size = hvd.rank(), hvd.size()
    controller = "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else "local"
    log = (lambda text: print(text, flush=True)) if rank == 0 else (lambda text: None)
    log("model %s, batch size %d per rank, %d ranks (%s), 1 compute thread per rank"
        % (args.model, args.batch_size, size, controller))

    # With peers, rank 0 starts Horovod's jobs and hands out the turns: one for the
    # warm-up and the first baseline, one per timed iteration, one for the last baseline.
    horovod, directory = None, None
    if args.peers:
        peers = load_peers()
        if rank == 0:
            try:
                horovod = peers.HorovodPeers(size, peer_argv, args.num_iters + 2,
                                             compute_argv=compute_argv(size))
                directory = horovod.directory
            except peers.PeerSetupError as exc:
                directory = "error: %s" % exc
        directory = hvd.broadcast_object(directory, 0, name="peers.dir")
        if directory.startswith("error: "):
            raise SystemExit(directory[len("error: "):])
        baton = peers.Baton(directory, "tutti", rank, hvd.barrier)
    else:
        baton = None

    def turn():
        return baton.turn() if baton else contextlib.nullcontext()

    baseline = make_trainer(args, plain) if not args.no_baseline else None
    runs = {"tutti": make_trainer(args, tutti_wrap(args))}
    if not args.no_ddp:
        start_ddp()
        runs["ddp"] = make_trainer(args, ddp_wrap)
    if not args.no_compute_only:
        runs["compute-only"] = make_trainer(args, plain)
    if baton:
        baton.ready()

    alone = []
    with turn():
        if baseline:
            alone.append(measure_alone(args, baseline))
        for trainer in runs.values():
            trainer.run(args.num_warmup_batches)
    rates = {label: [] for label in runs}
    labels = list(runs)
    for iteration in range(args.num_iters):
        with turn():
            shift = iteration % len(labels)
            for label in labels[shift:] + labels[:shift]:
                rates[label].append(time_iteration(args, runs[label]))
    with turn():
        if baseline:
            alone.append(measure_alone(args, baseline))

    results = {label: summary(args, label, r) for label, r in rates.items()}
    peer_versions = {}
    if horovod is not None:
        for job, peer in horovod.finish().items():
            if isinstance(peer, list):  # the compute-only job: each rank's rates
                medians = [statistics.median(rank_result["rates"]) for rank_result in peer]
                quartiles = statistics.quantiles(peer[0]["rates"], n=4)
                slowest = [min(r) for r in zip(*(rank_result["rates"] for rank_result in peer))]
                results[job] = (medians[0], (quartiles[0], quartiles[2]),
                                job_total(slowest, len(peer)), sum(medians))
            else:
                results[job] = tuple(peer["figures"])
                peer_versions[job] = peer["version"]
    if rank == 0:
        report(args, size, controller, alone, results, peer_versions)
    if not args.no_ddp:
        dist.destroy_process_group()
    hvd.shutdown()


def report(args, size, controller, alone, results, peer_versions):
    single = statistics.mean(alone) if alone else None
    if single:
        print("1 rank alone: %.1f img/s (before %.1f, after %.1f)" % (single, *alone))
    bound = results.get("compute-only")
    order = ["tutti", "ddp", "horovod-mpi", "horovod-gloo", "compute-only", "compute-only-job"]
    for label in [name for name in order if name in results]:
        median, (low, high), total, _ = results[label]
        line = "%-28s %.1f img/s per rank (%.1f-%.1f), total %.1f img/s" % (
            NAMES[label] + ":", median, low, high, total)
        if bound and not label.startswith("compute-only"):
            line += ", %.1f%% of the compute-only bound" % (100.0 * total / bound[2])
        if single:
            line += ", scaling efficiency %.1f%%" % (100.0 * total / (size * single))
        print(line, flush=True)
    job = results.get("compute-only-job")
    if job:
        print("share of the compute-only job (no communication library in the processes): "
              + ", ".join("%s %.3f" % (label, results[label][2] / job[2]) for label in order
                          if label in results and label != "compute-only-job"), flush=True)
    if bound:
        print("compute-only bound as the sum of the ranks' own medians (each rank timed to its "
              "own end): %.1f img/s; tutti %.3f of it" % (bound[3], results["tutti"][2] / bound[3]),
              flush=True)
    tutti_total = results["tutti"][2]
    for label, text in (("ddp", "DDP"), ("horovod-mpi", "Horovod (MPI)"),
                        ("horovod-gloo", "Horovod (Gloo)")):
        if label in results:
            print("tutti / %s throughput: %.3f" % (text, tutti_total / results[label][2]),
                  flush=True)
    if args.json:
        document = {"model": args.model, "batch_size": args.batch_size, "ranks": size,
                    "controller": controller, "num_iters": args.num_iters,
                    "num_batches_per_iter": args.num_batches_per_iter,
                    "argv": sys.argv, "alone": alone, "peer_versions": peer_versions,
                    "loadavg_1m_after": os.getloadavg()[0],
                    "results": {label: {"median": m, "quartiles": q, "total": t,
                                        "sum_of_medians": s}
                                for label, (m, q, t, s) in results.items()}}
        with open(args.json, "w") as stream:
            json.dump(document, stream, indent=1)


if __name__ == "__main__":
    main()
