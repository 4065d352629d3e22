"""An elastic torch training run whose every step is logged, for tests/elastic.

Linear regression in float64 on 96 fixed samples, SGD with momentum, batches of 4 per
worker from an ElasticSampler, a commit every second batch and at the end of each epoch.
Each line printed is one JSON event:
  step   {gen, rank, size, epoch, pos, indices}   pos: the batch's place in the epoch order
  commit {gen, rank, epoch, processed}
  final  {rank, size, weights}
  crash  {rank} just before the worker kills itself; reset {rank, size} after a re-formation
Every event carries `t`, the wall-clock time it was printed.
Options make one worker fail: --crash-host H --crash-epoch E --crash-batch B kills the
worker on host H (SIGKILL, or --crash-signal SIGSTOP to leave it hanging) when it reaches
that batch in the first generation; --fail-host H makes every worker started on host H
exit with code 3 at once.
"""

import argparse
import json
import os
import signal
import sys
import time

import torch

import tutti.torch as hvd

SAMPLES, FEATURES, BATCH = 96, 4, 4


def dataset():
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(SAMPLES, FEATURES, generator=generator, dtype=torch.float64)
    w = torch.arange(1, FEATURES + 1, dtype=torch.float64).unsqueeze(1)
    y = x @ w + 0.1 * torch.randn(SAMPLES, 1, generator=generator, dtype=torch.float64)
    return torch.utils.data.TensorDataset(torch.arange(SAMPLES), x, y)


def new_model():
    torch.manual_seed(0)
    return torch.nn.Linear(FEATURES, 1).double()


def say(**event):
    event["t"] = time.time()
    print(json.dumps(event), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--step-seconds", type=float, default=0.0)
    parser.add_argument("--crash-host")
    parser.add_argument("--crash-epoch", type=int, default=1)
    parser.add_argument("--crash-batch", type=int, default=3)
    parser.add_argument("--crash-signal", default="SIGKILL")
    parser.add_argument("--fail-host")
    args = parser.parse_args()
    host = os.environ.get("HOROVOD_HOSTNAME")
    if args.fail_host and host == args.fail_host:
        sys.stderr.write("failing on purpose on %s\n" % host)
        sys.exit(3)

    hvd.init()
    data = dataset()
    model = new_model()
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
        named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(data, shuffle=True, seed=1)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, sampler=sampler)
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0)
    first_generation = os.environ.get("TUTTI_ELASTIC_GENERATION") == "0"
    state.register_reset_callbacks([lambda: say(event="reset", rank=hvd.rank(), size=hvd.size())])

    @hvd.elastic.run
    def train(state):
        gen = int(os.environ.get("TUTTI_ELASTIC_GENERATION", "0"))
        while state.epoch < args.epochs:
            for batch_idx, (index, x, y) in enumerate(loader):
                if (first_generation and host == args.crash_host and gen == 0
                        and state.epoch == args.crash_epoch and batch_idx == args.crash_batch):
                    say(event="crash", rank=hvd.rank())
                    os.kill(os.getpid(), getattr(signal, args.crash_signal))
                pos = sampler._segment_start + batch_idx * BATCH * hvd.size()
                say(event="step", gen=gen, rank=hvd.rank(), size=hvd.size(),
                    epoch=state.epoch, pos=pos, indices=index.tolist())
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
                state.sampler.record_batch(batch_idx, BATCH)
                if args.step_seconds:
                    time.sleep(args.step_seconds)
                if batch_idx % 2 == 1:
                    say(event="commit", gen=gen, rank=hvd.rank(), epoch=state.epoch,
                        processed=sampler.processed_num)
                    state.commit()
            state.epoch += 1
            state.sampler.set_epoch(state.epoch)
            say(event="commit", gen=gen, rank=hvd.rank(), epoch=state.epoch, processed=0)
            state.commit()

    say(event="ready", rank=hvd.rank())
    train(state)
    weights = [p.detach().flatten().tolist() for p in model.parameters()]
    say(event="final", rank=hvd.rank(), size=hvd.size(), weights=weights)


if __name__ == "__main__":
    main()
