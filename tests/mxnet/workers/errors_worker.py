"""Core errors surface as MXNetError when the result is read, and the process goes on.

Run on 2 ranks. Prints "rank R: error checks passed" on success.
"""

import sys
import threading

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


def main():
    hvd.init()
    rank = hvd.rank()

    # Ranks disagree on the shape of one request: both see the core's message.
    mismatched = mx.nd.ones((3,) if rank == 0 else (4,))
    result = hvd.allreduce(mismatched, op=hvd.Sum, name="shape_mismatch")
    message = expect_mxnet_error(result, "shape_mismatch", "shape")
    print("rank %d: shape mismatch -> %s" % (rank, message.splitlines()[0]), flush=True)

    # Ranks disagree on the dtype.
    typed = mx.nd.ones((2, 2), dtype="float32" if rank == 0 else "float64")
    expect_mxnet_error(hvd.allreduce(typed, op=hvd.Sum, name="dtype_mismatch"), "dtype_mismatch")

    # An in-place request whose ranks disagree on the op: the error is attached to the
    # tensor itself ...
    inplace = mx.nd.ones((2, 2))
    hvd.allreduce_(inplace, op=hvd.Sum if rank == 0 else hvd.Max, name="op_mismatch")
    expect_mxnet_error(inplace, "op_mismatch")
    # ... and once read, the tensor is usable again.
    hvd.allreduce_(inplace, op=hvd.Sum, name="after_error")
    np.testing.assert_array_equal(inplace.asnumpy(), np.full((2, 2), 2.0))

    # A request the core rejects outright (no average of booleans).
    flags = mx.nd.array([True, False], dtype=np.bool_)
    expect_mxnet_error(hvd.allreduce(flags, op=hvd.Average, name="bool_average"), "average")

    # The error reaches whichever Python thread waits for the result.
    seen = []
    pending = hvd.allreduce(mx.nd.ones((3,) if rank == 0 else (2,)), op=hvd.Sum,
                            name="thread_mismatch")
    waiter = threading.Thread(target=lambda: seen.append(expect_mxnet_error(
        pending, "thread_mismatch")))
    waiter.start()
    waiter.join(60)
    assert len(seen) == 1, "the waiting thread did not see the MXNetError"

    # A DistributedTrainer whose model differs between ranks: the gradient reduction
    # fails, and reading the updated weight raises the core's message.
    net = mx.gluon.nn.Dense(2, in_units=3 + rank)
    net.initialize()
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.1},
                                     prefix="mismatched.")
    with mx.autograd.record():
        loss = net(mx.nd.ones((1, 3 + rank))).sum()
    loss.backward()
    trainer.step(1)
    expect_mxnet_error(net.weight.data(), "mismatched.grad.", "shape")

    # Later work is unaffected: collectives and plain MXNet operators run normally.
    for step in range(3):
        value = hvd.allreduce(mx.nd.full((5,), rank + step), op=hvd.Sum, name="ok.%d" % step)
        np.testing.assert_array_equal(value.asnumpy(), np.full(5, 1.0 + 2 * step))
    mx.nd.waitall()

    # Bad arguments are refused at once, before anything is queued.
    for call, error in [
        (lambda: hvd.allreduce(np.ones(3)), TypeError),
        (lambda: hvd.allreduce(mx.nd.ones(3), op=17), ValueError),
        (lambda: hvd.allreduce(mx.nd.ones(3), op=hvd.Sum, average=True), ValueError),
        (lambda: hvd.allreduce(mx.nd.ones((4, 4)).tostype("row_sparse")), hvd.TuttiError),
    ]:
        try:
            call()
        except error:
            pass
        else:
            raise AssertionError("expected %s" % error.__name__)

    print("rank %d: error checks passed" % rank, flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
