import mxnet as mx  # first line, as in every Horovod MXNet script: must import as it is

# A Horovod MXNet script with only its import changed, checking Horovod 0.28.1's
# behaviour: allgather of mismatched tensors raises MXNetError at the call, alltoall
# without splits divides uneven rows with the remainder on the first ranks, and Horovod's
# module paths and public names exist. Prints "rank R: horovod mxnet checks passed".

import sys

import numpy as np
from mxnet.base import MXNetError

import tutti.mxnet as hvd
from tutti.mxnet.mpi_ops import allgather, allreduce_, alltoall

HOROVOD_MXNET_NAMES = [
    "init", "shutdown", "is_initialized", "start_timeline", "stop_timeline", "size",
    "local_size", "cross_size", "rank", "local_rank", "cross_rank", "mpi_threads_supported",
    "mpi_enabled", "mpi_built", "gloo_enabled", "gloo_built", "nccl_built", "cuda_built",
    "allgather", "grouped_allgather", "allreduce", "allreduce_", "grouped_allreduce",
    "grouped_allreduce_", "alltoall", "broadcast", "broadcast_", "reducescatter",
    "grouped_reducescatter", "allgather_object", "broadcast_object", "broadcast_parameters",
    "Compression", "DistributedOptimizer", "DistributedTrainer", "ProcessSet",
    "global_process_set", "add_process_set", "remove_process_set",
]


def raises_at_call(function, *args, **kwargs):
    try:
        function(*args, **kwargs)
    except MXNetError as exc:
        return str(exc)
    raise AssertionError("%s did not raise MXNetError at the call" % function.__name__)


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    missing = [name for name in HOROVOD_MXNET_NAMES if not hasattr(hvd, name)]
    assert not missing, missing

    # Trailing dimensions differ: every rank gets MXNetError from the call itself.
    message = raises_at_call(allgather, mx.nd.ones((1, 2 + rank)), name="gather.dims")
    assert "gather.dims" in message and "(1, 2) float32" in message, message
    # dtypes differ.
    dtype = "float32" if rank == 0 else "float64"
    message = raises_at_call(hvd.allgather, mx.nd.ones((2,), dtype=dtype), name="gather.dtype")
    assert "float64" in message and "float32" in message, message
    # Number of dimensions differs.
    shape = (2, 2) if rank == 0 else (2, 2, 1)
    raises_at_call(hvd.allgather, mx.nd.ones(shape), name="gather.ndim")
    # First dimensions may differ, as always.
    gathered = hvd.allgather(mx.nd.full((rank + 1, 2), rank), name="gather.rows")
    want = np.concatenate([np.full((r + 1, 2), r) for r in range(size)])
    np.testing.assert_array_equal(gathered.asnumpy(), want)

    # alltoall without splits: 7 rows over `size` ranks, the remainder to the first ranks;
    # the result is the tensor alone, as in Horovod.
    rows = 7
    counts = [rows // size + (1 if j < rows % size else 0) for j in range(size)]
    out = alltoall(mx.nd.array(np.arange(rows) + 10 * rank), name="a2a.uneven")
    assert isinstance(out, mx.nd.NDArray), type(out)
    start = sum(counts[:rank])
    want = np.concatenate([np.arange(rows)[start:start + counts[rank]] + 10 * r
                           for r in range(size)])
    np.testing.assert_array_equal(out.asnumpy(), want)
    # Fewer rows than ranks: the last ranks receive nothing from anyone.
    out = hvd.alltoall(mx.nd.array([rank]), name="a2a.short")
    np.testing.assert_array_equal(out.asnumpy(), [r for r in range(size)] if rank == 0 else [])

    # Horovod's positional order of DistributedOptimizer's arguments.
    optimizer = hvd.DistributedOptimizer(mx.optimizer.SGD(learning_rate=0.1), 1.0, 0,
                                         hvd.global_process_set)
    assert optimizer.learning_rate == 0.1

    # The job keeps working after the refused calls.
    summed = allreduce_(mx.nd.ones((3,)), op=hvd.Sum, name="after")
    np.testing.assert_array_equal(summed.asnumpy(), [size] * 3)
    print("rank %d: horovod mxnet checks passed" % rank, flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
