"""Data-parallel training of a PyTorch classifier on scikit-learn's digits with tutti.

    mpirun -np 2 python torch_digits.py
    tuttirun -np 2 python torch_digits.py --epochs 10 --batch-size 32 --lr 0.05

Every rank trains on its own shard of the training split; hvd.DistributedOptimizer
averages the gradients (each one's allreduce starts as soon as backward has produced it),
so all ranks apply the same updates. Rank 0 prints the training loss and the validation
accuracy (over all ranks' shards of the validation split) after each epoch. The script
exits with status 1 when the final validation accuracy stays below --target-accuracy or
the ranks' weights differ. The data set ships with scikit-learn: nothing is downloaded.
"""

import argparse
import sys
import time

import numpy as np
import torch
from sklearn.datasets import load_digits

import tutti.torch as hvd

SEED = 42


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=10, help="passes over the training split")
    parser.add_argument("--batch-size", type=int, default=32, help="samples per step and rank")
    parser.add_argument("--lr", type=float, default=0.05, help="SGD learning rate")
    parser.add_argument("--target-accuracy", type=float, default=0.9,
                        help="final validation accuracy below which the script fails")
    return parser.parse_args()


def load_split(validation_fraction=0.2):
    """The digits as float32 features in [0, 1] and int64 labels, split the same way on
    every rank (fixed seed)."""
    digits = load_digits()
    features = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    labels = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.tensor(np.random.RandomState(SEED).permutation(len(labels)))
    cut = int(len(labels) * (1 - validation_fraction))
    train, validation = order[:cut], order[cut:]
    return (features[train], labels[train]), (features[validation], labels[validation])


def shard(tensors, rank, size):
    """This rank's share: every size-th sample, starting at its rank."""
    return tuple(t[rank::size] for t in tensors)


def build_model():
    torch.manual_seed(SEED)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10))


def global_mean(total, count, name):
    """sum(total) / sum(count) over all ranks."""
    sums = hvd.allreduce(torch.tensor([total, count], dtype=torch.float64), op=hvd.Sum,
                         name=name)
    return (sums[0] / sums[1]).item()


def main():
    args = parse_args()
    hvd.init()
    torch.set_num_threads(1)
    rank, size = hvd.rank(), hvd.size()
    (train_x, train_y), (val_x, val_y) = load_split()
    train_x, train_y = shard((train_x, train_y), rank, size)
    val_x, val_y = shard((val_x, val_y), rank, size)

    model = build_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * size, momentum=0.9)
    # Start from rank 0's weights and optimizer state, then average every gradient.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    loss_fn = torch.nn.CrossEntropyLoss()

    # Every rank takes the same number of steps (the shards differ by at most one sample).
    steps = int(hvd.allreduce(torch.tensor(len(train_y) // args.batch_size), op=hvd.Min,
                              name="steps"))
    generator = torch.Generator().manual_seed(SEED + rank)
    accuracy = 0.0
    for epoch in range(args.epochs):
        start = time.monotonic()
        model.train()
        order = torch.randperm(len(train_y), generator=generator)
        total_loss = 0.0
        for step in range(steps):
            batch = order[step * args.batch_size:(step + 1) * args.batch_size]
            optimizer.zero_grad()
            loss = loss_fn(model(train_x[batch]), train_y[batch])
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
        model.eval()
        with torch.no_grad():
            correct = float((model(val_x).argmax(dim=1) == val_y).sum())
        train_loss = global_mean(total_loss, steps, "loss.%d" % epoch)
        accuracy = global_mean(correct, len(val_y), "accuracy.%d" % epoch)
        if rank == 0:
            print("epoch %d: training loss %.4f, validation accuracy %.4f (%.2f s)"
                  % (epoch + 1, train_loss, accuracy, time.monotonic() - start), flush=True)

    identical = True
    for name, param in model.named_parameters():
        high = hvd.allreduce(param.detach(), op=hvd.Max, name="check.max." + name)
        low = hvd.allreduce(param.detach(), op=hvd.Min, name="check.min." + name)
        identical = identical and torch.equal(high, low)  # bit for bit
    if rank == 0:
        print("final validation accuracy %.4f on %d ranks; weights %s across ranks"
              % (accuracy, size, "agree" if identical else "DIFFER"), flush=True)
    hvd.shutdown()
    return 0 if identical and accuracy >= args.target_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
