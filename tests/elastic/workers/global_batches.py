"""The job that keras_train.py, tf_train.py and mxnet_train.py run, each with its framework.

A small regression in float64 on fixed data: 144 samples, 6 global batches of 24 per
epoch, 3 epochs. Worker `rank` of `size` trains on its 24/size rows of every global batch,
so each step averages the gradient of the whole global batch whatever the size, and a run
alone (no launcher) gives the weights of a job without failures. A commit every 2 batches
and at each epoch's end; after a re-formation training resumes at the committed epoch and
batch. Each line printed is one JSON event (with `t`, the time it was printed):
  step  {gen, rank, size, epoch, batch, indices}   indices: the sample rows of the step
  crash {rank}      just before the worker kills itself
  reset {rank, size} after a re-formation
  final {rank, size, epoch, weights}
Options: --crash-host H [--crash-epoch E --crash-batch B] kills (SIGKILL) the worker on
host H when it reaches that batch in generation 0; --fail-host H makes a worker on H exit
with code 3 at once (before its framework is imported); --step-seconds S pauses after
each step; --epochs N.
"""

import argparse
import json
import os
import signal
import sys
import time

SAMPLES, FEATURES, GLOBAL_BATCH, COMMIT_EVERY = 144, 4, 24, 2
BATCHES = SAMPLES // GLOBAL_BATCH


def say(**event):
    event["t"] = time.time()
    print(json.dumps(event), flush=True)


def generation():
    return int(os.environ.get("TUTTI_ELASTIC_GENERATION", "0"))


def options(parser=None):
    """The job's command line (`parser` may hold a worker's own options). A worker on the
    --fail-host exits here."""
    parser = parser or argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--step-seconds", type=float, default=0.0)
    parser.add_argument("--crash-host")
    parser.add_argument("--crash-epoch", type=int, default=1)
    parser.add_argument("--crash-batch", type=int, default=3)
    parser.add_argument("--fail-host")
    args = parser.parse_args()
    args.host = os.environ.get("HOROVOD_HOSTNAME")
    if args.fail_host and args.host == args.fail_host:
        sys.stderr.write("failing on purpose on %s\n" % args.host)
        sys.exit(3)
    return args


def data():
    """The samples and targets (float64 numpy arrays), the same in every process."""
    import numpy as np

    rng = np.random.RandomState(3)
    x = rng.randn(SAMPLES, FEATURES)
    return x, x @ np.arange(1, FEATURES + 1, dtype="float64").reshape(FEATURES, 1)


def rows(rank, size, batch):
    """The rows of global batch `batch` that worker `rank` of `size` trains on."""
    part = GLOBAL_BATCH // size
    start = batch * GLOBAL_BATCH + rank * part
    return range(start, start + part)


def begin_step(args, rank, size, epoch, batch):
    """Crashes where asked, else logs the step; returns its rows as a slice."""
    if (args.crash_host and args.host == args.crash_host and generation() == 0
            and (epoch, batch) == (args.crash_epoch, args.crash_batch)):
        say(event="crash", rank=rank)
        os.kill(os.getpid(), signal.SIGKILL)
    mine = rows(rank, size, batch)
    say(event="step", gen=generation(), rank=rank, size=size, epoch=epoch, batch=batch,
        indices=list(mine))
    return slice(mine.start, mine.stop)


def train_loop(state, args, rank, size, train_step):
    """The loop of a custom training script: `train_step(rows)` trains one step on the
    rows (a slice) of this worker; resumes at state.epoch and state.batch."""
    while state.epoch < args.epochs:
        while state.batch < BATCHES:
            train_step(begin_step(args, rank, size, state.epoch, state.batch))
            state.batch += 1
            if args.step_seconds:
                time.sleep(args.step_seconds)
            if state.batch % COMMIT_EVERY == 0:
                state.commit()
        state.epoch += 1
        state.batch = 0
        state.commit()
