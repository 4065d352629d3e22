"""tutti.torch on CUDA tensors (needs a GPU): the allreduce and collectives matrices (every
collective x dtype x 1-3 dims, sync, async, in place, grouped) with every input on this
rank's GPU, then CUDA specifics: results on the input's device, a producer on a side stream,
CPU and GPU tensors in flight together, gradients through allreduce.

TUTTI_TEST_SHARED_GPU=1 puts every rank on GPU 0 (with TUTTI_GPU_OPERATIONS=gloo or mpi:
the staged path; NCCL refuses two ranks on one GPU). Prints one summary line per rank.
"""

import os
import sys

import torch

import tutti.torch as hvd
import allreduce_matrix
import collectives_matrix


def main():
    hvd.init()
    shared = os.environ.get("TUTTI_TEST_SHARED_GPU") == "1"
    device = torch.device("cuda", 0 if shared else hvd.local_rank() % torch.cuda.device_count())
    torch.cuda.set_device(device)

    # Every input the matrices make lives on the GPU; every result must come back there.
    make_on_host = allreduce_matrix.make_input

    def make_input(*args):
        return make_on_host(*args).to(device)

    allreduce_matrix.make_input = make_input
    collectives_matrix.make_input = make_input
    check_values = allreduce_matrix.Checker.check

    def check(self, label, got, expected):
        if isinstance(got, torch.Tensor) and got.device != device:
            return self.fail(label, "result on %s, expected %s" % (got.device, device))
        return check_values(self, label, got, expected)

    allreduce_matrix.Checker.check = check
    check = allreduce_matrix.Checker()
    allreduce_matrix.dtype_matrix(check)
    allreduce_matrix.scale_factors(check)
    allreduce_matrix.many_in_flight(check)
    collectives_matrix.dtype_matrix(check)

    # A producer on a side stream: the core waits for it on its own stream, and the result
    # is ready for the stream current at synchronize().
    side = torch.cuda.Stream(device)
    with torch.cuda.stream(side):
        x = torch.full((1 << 20,), float(check.rank + 1), device=device)
        x.mul_(2)
        handle = hvd.allreduce_async_(x, op=hvd.Sum, name="side.stream")
        hvd.synchronize(handle)
        total = x.sum().item()
    expected = 2.0 * sum(range(1, check.size + 1)) * (1 << 20)
    if total != expected:
        check.fail("side.stream", "sum %s, expected %s" % (total, expected))
    else:
        check.passed += 1

    # CPU and GPU tensors in flight together (each device's tensors fuse on their own).
    handles = []
    for i in range(8):
        on = device if i % 2 else torch.device("cpu")
        handles.append((on, hvd.allreduce_async(torch.full((100 + i,), float(i), device=on),
                                                op=hvd.Sum, name="mixed.%d" % i)))
    for i, (on, handle) in enumerate(handles):
        got = hvd.synchronize(handle)
        check.check("mixed.%d" % i, got, torch.full((100 + i,), float(i * check.size), device=on))

    # Gradients flow through an allreduce of a CUDA tensor.
    w = torch.arange(4, dtype=torch.float32, device=device, requires_grad=True)
    hvd.allreduce(w * 2, op=hvd.Sum, name="grad").sum().backward()
    check.check("grad", w.grad, torch.full((4,), 2.0 * check.size, device=device))

    hvd.shutdown()
    for failure in check.failures:
        print("rank %d: FAIL %s" % (check.rank, failure), flush=True)
    print("rank %d/%d: %d cases ok, %d failed on %s" % (
        check.rank, check.size, check.passed, len(check.failures), device), flush=True)
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
