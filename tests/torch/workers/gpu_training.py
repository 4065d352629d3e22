"""DistributedOptimizer and SyncBatchNorm on CUDA (needs a GPU): N ranks each train on their
part of a batch and must end with the weights of one process training on the whole batch
(which every rank also computes itself). Gradient hooks enqueue on the gradient's stream.
TUTTI_TEST_SHARED_GPU=1 puts every rank on GPU 0. Prints one summary line per rank."""

import copy
import os
import sys

import torch

import tutti.torch as hvd

ROWS_PER_RANK = 8
STEPS = 3


def model(device):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.BatchNorm1d(16),
                               torch.nn.ReLU(), torch.nn.Linear(16, 3)).to(device)


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    shared = os.environ.get("TUTTI_TEST_SHARED_GPU") == "1"
    device = torch.device("cuda", 0 if shared else hvd.local_rank() % torch.cuda.device_count())
    torch.cuda.set_device(device)
    generator = torch.Generator().manual_seed(1)
    data = torch.randn(STEPS, ROWS_PER_RANK * size, 6, generator=generator).to(device)
    target = torch.randn(STEPS, ROWS_PER_RANK * size, 3, generator=generator).to(device)

    alone = model(device)
    alone_opt = torch.optim.SGD(alone.parameters(), lr=0.1, momentum=0.9)
    for step in range(STEPS):
        alone_opt.zero_grad()
        torch.nn.functional.mse_loss(alone(data[step]), target[step]).backward()
        alone_opt.step()

    net = hvd.SyncBatchNorm.convert_sync_batchnorm(model(device))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=net.named_parameters())
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    mine = slice(rank * ROWS_PER_RANK, (rank + 1) * ROWS_PER_RANK)
    for step in range(STEPS):
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(data[step][mine]), target[step][mine]).backward()
        opt.step()

    failures = []
    for (name, a), b in zip(net.state_dict().items(), alone.state_dict().values()):
        if a.dtype.is_floating_point and not torch.allclose(a, b, rtol=1e-4, atol=1e-5):
            failures.append("%s differs by %.3g" % (name, (a - b).abs().max().item()))
    hvd.shutdown()
    for failure in failures:
        print("rank %d: FAIL %s" % (rank, failure), flush=True)
    print("rank %d/%d: training on %s matches one process: %s" % (
        rank, size, device, "no" if failures else "yes"), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
