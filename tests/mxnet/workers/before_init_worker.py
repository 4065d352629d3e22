"""Collectives before hvd.init() raise an error that says to call hvd.init(); a single
process without a launcher then works on its own. Prints "before-init checks passed"."""

import sys

import tutti.mxnet as hvd

import mxnet as mx
import numpy as np


def expect_not_initialized(call):
    try:
        call()
    except hvd.NotInitializedError as exc:
        assert "hvd.init()" in str(exc) or "init()" in str(exc), str(exc)
        return str(exc)
    raise AssertionError("no NotInitializedError")


def main():
    assert not hvd.is_initialized()
    print(expect_not_initialized(lambda: hvd.allreduce(mx.nd.ones(3))), flush=True)
    expect_not_initialized(lambda: hvd.allreduce_(mx.nd.ones(3)))
    expect_not_initialized(hvd.rank)
    net = mx.gluon.nn.Dense(2, in_units=3)
    net.initialize()
    expect_not_initialized(lambda: hvd.broadcast_parameters(net.collect_params()))

    hvd.init()
    assert hvd.is_initialized() and hvd.size() == 1 and hvd.rank() == 0
    result = hvd.allreduce(mx.nd.array([1.0, 2.0, 3.0]), op=hvd.Sum)
    np.testing.assert_array_equal(result.asnumpy(), [1.0, 2.0, 3.0])
    hvd.shutdown()
    expect_not_initialized(lambda: hvd.allreduce(mx.nd.ones(3)))
    print("before-init checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
