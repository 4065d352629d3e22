"""GPU allreduce, tutti vs torch.distributed on the same CUDA tensors in one launch (needs a
GPU). Run one process per rank under tuttirun (or alone); each size is timed for tutti
(`hvd.allreduce_`, float32 Sum) and for torch.distributed (`dist.all_reduce`), alternating,
with the GPU synchronized around every timed block. Reported as nccl-tests defines it:
algbw = bytes / time, busbw = algbw * 2(n-1)/n (0 on one rank by definition: compare the
times there).

    python tools/bench/gpu_allreduce.py --backend nccl --json out.json
    tuttirun -np 2 python tools/bench/gpu_allreduce.py --backend gloo --shared-gpu

--backend is torch.distributed's (nccl: one rank per GPU; gloo: the staged comparison when
ranks share a GPU, with TUTTI_GPU_OPERATIONS=gloo for tutti). Rank 0 prints one line per size.
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist

import tutti.torch as hvd

MIB = 1 << 20


def timed(function, iterations):
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iterations):
        function()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iterations


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    parser.add_argument("--min-bytes", type=int, default=MIB)
    parser.add_argument("--max-bytes", type=int, default=1024 * MIB)
    parser.add_argument("--factor", type=int, default=4, help="size step (x4: 1 MiB, 4 MiB, ...)")
    parser.add_argument("--shared-gpu", action="store_true", help="every rank on GPU 0")
    parser.add_argument("--json", help="write every measurement here (rank 0)")
    args = parser.parse_args()

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    device = torch.device("cuda", 0 if args.shared_gpu else hvd.local_rank())
    torch.cuda.set_device(device)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", os.environ.get("TUTTI_BENCH_TORCH_PORT", "29531"))
    dist.init_process_group(args.backend, rank=rank, world_size=size, device_id=device
                            if args.backend == "nccl" else None)

    sizes = [4]
    b = args.min_bytes
    while b <= args.max_bytes:
        sizes.append(b)
        b *= args.factor
    rows = []
    for nbytes in sizes:
        tensor = torch.ones(max(nbytes // 4, 1), device=device)
        # A time budget per size: many iterations when small, a few when large.
        iterations = 200 if nbytes <= 4 else max(3, min(50, (256 * MIB) // nbytes))
        tutti_call = lambda: hvd.allreduce_(tensor, op=hvd.Sum, name="bench.%d" % nbytes)
        torch_call = lambda: dist.all_reduce(tensor)
        for warm in (tutti_call, torch_call, tutti_call, torch_call):
            warm()
        results = {"tutti": [], "torch": []}
        for _ in range(3):  # alternate, keep the best of each
            results["tutti"].append(timed(tutti_call, iterations))
            results["torch"].append(timed(torch_call, iterations))
        row = {"bytes": nbytes, "ranks": size}
        for name, times in results.items():
            t = min(times)
            algbw = nbytes / t / 1e9
            row[name] = {"seconds": t, "algbw_gbs": algbw, "busbw_gbs": algbw * 2 * (size - 1) / size}
        row["time_ratio_torch_over_tutti"] = row["torch"]["seconds"] / row["tutti"]["seconds"]
        rows.append(row)
        if rank == 0:
            print("%10s  tutti %9.1f us %7.2f GB/s busbw %7.2f | torch %9.1f us %7.2f GB/s "
                  "busbw %7.2f | torch/tutti time %.2f" % (
                      "%d B" % nbytes if nbytes < MIB else "%d MiB" % (nbytes // MIB),
                      row["tutti"]["seconds"] * 1e6, row["tutti"]["algbw_gbs"],
                      row["tutti"]["busbw_gbs"], row["torch"]["seconds"] * 1e6,
                      row["torch"]["algbw_gbs"], row["torch"]["busbw_gbs"],
                      row["time_ratio_torch_over_tutti"]), flush=True)
        del tensor
    if rank == 0 and args.json:
        with open(args.json, "w") as stream:
            json.dump({"backend": args.backend, "ranks": size, "rows": rows,
                       "gpu": torch.cuda.get_device_name(device),
                       "torch": torch.__version__}, stream, indent=1)
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
