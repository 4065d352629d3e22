"""Failures of the collectives beyond allreduce: a core error surfaces as MXNetError with the
core's message when the result is read, bad arguments are refused at the call, and the
process keeps working. Runs on 2 or 3 ranks; prints "rank R: collective error checks
passed" on success.
"""

import sys

import tutti.mxnet as hvd

import mxnet as mx
import numpy as np
from mxnet.base import MXNetError


def expect_mxnet_error(array, *fragments):
    """Reads `array` and returns the MXNetError message, checking it names `fragments`."""
    try:
        array.wait_to_read()
    except MXNetError as exc:
        message = str(exc)
    else:
        raise AssertionError("reading the result did not raise MXNetError")
    for fragment in fragments:
        assert fragment.lower() in message.lower(), "%r not in %r" % (fragment, message)
    return message


def expect_raises(kind, function, *args, **kwargs):
    try:
        function(*args, **kwargs)
    except kind as exc:
        return str(exc)
    raise AssertionError("%s did not raise %s" % (function.__name__, kind.__name__))


def check_still_works(size, name):
    result = hvd.allreduce(mx.nd.ones((2,)), op=hvd.Sum, name=name)
    np.testing.assert_array_equal(result.asnumpy(), [size, size])


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()

    # Ranks disagree on the trailing dimensions or the dtype: as in Horovod, allgather
    # raises MXNetError at the call (it waits for the gathered shapes anyway), on every rank.
    message = expect_raises(MXNetError, hvd.allgather, mx.nd.ones((2, 3 + rank)),
                            name="allgather_mismatch")
    for fragment in ("allgather_mismatch", "set rank 0 has (2, 3) float32",
                     "set rank 1 has (2, 4) float32"):
        assert fragment in message, message
    print("rank %d: allgather mismatch -> MXNetError: %s" % (rank, message), flush=True)
    message = expect_raises(MXNetError, hvd.grouped_allgather,
                            [mx.nd.ones((1,)), mx.nd.ones((2,), dtype="int32" if rank else "int64")],
                            name="allgather_dtype")
    assert "allgather_dtype (tensor 1)" in message and "int64" in message, message
    check_still_works(size, "after_allgather")

    copy = hvd.broadcast(mx.nd.ones((3 + rank,)), root_rank=0, name="broadcast_mismatch")
    message = expect_mxnet_error(copy, "broadcast_mismatch")
    print("rank %d: broadcast mismatch -> %s" % (rank, message.splitlines()[0]), flush=True)
    check_still_works(size, "after_broadcast")

    part = hvd.reducescatter(mx.nd.ones((size, 1 + rank)), op=hvd.Sum,
                             name="reducescatter_mismatch")
    expect_mxnet_error(part, "reducescatter_mismatch")

    output = hvd.alltoall(mx.nd.ones((size, 1 + rank)), name="alltoall_mismatch")
    expect_mxnet_error(output, "alltoall_mismatch")

    typed = hvd.broadcast(mx.nd.ones((2,), dtype="float32" if rank == 0 else "int32"), 0,
                          name="broadcast_dtype")
    expect_mxnet_error(typed, "broadcast_dtype")
    check_still_works(size, "after_mismatches")

    # A root that is no member of the set is the core's InvalidArgument: as in Horovod it
    # raises MXNetError when the result is read. root_rank is a global rank, also on a set.
    copy = hvd.broadcast(mx.nd.ones((2,)), root_rank=size, name="root_outside")
    expect_mxnet_error(copy, "broadcast of 'root_outside': root_rank %d is out of range for a "
                       "process set of size %d" % (size, size))
    rest = hvd.add_process_set(list(range(1, size)))
    if rank > 0:
        members = ", ".join(str(r) for r in range(1, size))
        expected = "root_rank 0 is not a member of process set %d (ranks %s)" % (
            rest.process_set_id, members)
        copy = hvd.broadcast(mx.nd.ones((2,)), root_rank=0, name="root_not_member",
                             process_set=rest)
        message = expect_mxnet_error(copy, "broadcast of 'root_not_member': " + expected)
        line = next(line for line in message.splitlines() if "root_not_member" in line)
        print("rank %d: root outside the set -> MXNetError: %s" % (rank, line), flush=True)
        expect_raises(MXNetError, hvd.broadcast_object, "x", root_rank=0, process_set=rest)
    hvd.barrier()
    hvd.remove_process_set(rest)
    check_still_works(size, "after_root_errors")

    # Bad arguments are refused on the calling rank, before anything is queued.
    expect_raises(ValueError, hvd.broadcast, mx.nd.ones((2,)), root_rank=1.5)
    expect_raises(ValueError, hvd.alltoall, mx.nd.ones((3,)), splits=[1] * (size + 1))
    expect_raises(ValueError, hvd.reducescatter, mx.nd.array(1.0))
    expect_raises(TypeError, hvd.grouped_allreduce, mx.nd.ones((2,)))
    expect_raises(ValueError, hvd.grouped_allgather, [])
    expect_raises(TypeError, hvd.allgather, np.ones(3))

    # While rank 0 has joined, the others' broadcasts fail naming the joined rank.
    if rank == 0:
        hvd.join()
    else:
        refused = hvd.broadcast(mx.nd.ones((2,)), root_rank=1, name="broadcast_after_join")
        expect_mxnet_error(refused, "broadcast_after_join")
        hvd.join()
    check_still_works(size, "after_join")

    hvd.barrier()
    print("rank %d: collective error checks passed" % rank, flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
