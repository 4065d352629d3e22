"""Synthetic-data training throughput: tutti's DistributedOptimizer against PyTorch's
DistributedDataParallel (Gloo backend) in the same launch, and against one rank alone.

    mpirun -np 2 python pytorch_synthetic_benchmark.py --model cnn
    tuttirun -np 2 python pytorch_synthetic_benchmark.py --model mlp --batch-size 64

Every rank runs one compute thread (torch.set_num_threads(1)). The run has three parts:
1. baseline: rank 0 trains the model alone, without any communication, while the other
   ranks wait (measured before and after the distributed parts; the mean is used);
2. the distributed parts: each timed iteration runs --num-batches-per-iter batches with
   tutti's DistributedOptimizer and then the same number with DDP, alternating, so that
   both see the same machine load;
3. a summary: images/s per rank (median and quartiles over the iterations), the job's
   total (sum of the ranks' medians), tutti / DDP, and scaling efficiency =
   total / (ranks x the baseline's images/s; median of its iterations, mean of before
   and after).

DDP's process group is started with init_method="env://": MASTER_ADDR and MASTER_PORT are
taken from the environment when the launcher sets them, else 127.0.0.1 and a free port
chosen by rank 0 (single-host jobs). Models are defined here (no torchvision):
  cnn  compute-bound: 4 convolutions on 3x32x32 images, 0.24 M parameters
  mlp  communication-bound: 3 linear layers on 1024 features, 6.3 M parameters
"""

import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import tutti.torch as hvd


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


def summary(args, label, rates):
    """This rank's median images/s and the 25th-75th percentile range over the timed
    iterations (medians resist the bursts of other load on a shared machine), and the
    job's total: the sum of the ranks' medians."""
    quartiles = statistics.quantiles(rates, n=4) if len(rates) > 1 else [rates[0]] * 3
    median = statistics.median(rates)
    total = hvd.allreduce(torch.tensor(median, dtype=torch.float64), op=hvd.Sum,
                          name="total." + label).item()
    return median, (quartiles[0], quartiles[2]), total


def main():
    args = parse_args()
    hvd.init()
    torch.set_num_threads(1)
    rank, size = hvd.rank(), hvd.size()
    controller = "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else "local"
    log = (lambda text: print(text, flush=True)) if rank == 0 else (lambda text: None)
    log("model %s, batch size %d per rank, %d ranks (%s), 1 compute thread per rank"
        % (args.model, args.batch_size, size, controller))

    alone = []
    if not args.no_baseline:
        baseline = make_trainer(args, plain)
        alone.append(measure_alone(args, baseline))

    runs = {"tutti": make_trainer(args, tutti_wrap(args))}
    if not args.no_ddp:
        start_ddp()
        runs["ddp"] = make_trainer(args, ddp_wrap)
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
    results = {label: summary(args, label, r) for label, r in rates.items()}
    if rank == 0:
        single = statistics.mean(alone) if alone else None
        if single:
            log("1 rank alone: %.1f img/s (before %.1f, after %.1f)" % (single, *alone))
        names = {"tutti": "tutti DistributedOptimizer", "ddp": "torch DDP (gloo)"}
        for label, (median, (low, high), total) in results.items():
            line = "%-28s %.1f img/s per rank (%.1f-%.1f), total %.1f img/s" % (
                names[label] + ":", median, low, high, total)
            if single:
                line += ", scaling efficiency %.1f%%" % (100.0 * total / (size * single))
            log(line)
        if "ddp" in results:
            log("tutti / DDP throughput: %.3f" % (results["tutti"][2] / results["ddp"][2]))
    if not args.no_ddp:
        dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
