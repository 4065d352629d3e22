"""One process, no launcher: collectives before init() fail with a message that says to
call init(); then init -> allreduce (size 1) -> shutdown -> init works.

Prints "lifecycle ok" and exits 0, or raises.
"""

import torch

import tutti.torch as hvd


def expect_not_initialized(label, function):
    try:
        function()
    except hvd.NotInitializedError as exc:
        assert isinstance(exc, RuntimeError), label
        assert "init()" in str(exc), "%s: the message does not name the fix: %s" % (label, exc)
        print("%s: %s" % (label, exc), flush=True)
    else:
        raise AssertionError("%s: succeeded before init()" % label)


def size_one_allreduce():
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert torch.equal(hvd.allreduce(x), x)
    assert torch.equal(hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5), x)
    y = x.clone()
    assert hvd.allreduce_(y, op=hvd.Max) is y and torch.equal(y, x)
    assert torch.equal(hvd.synchronize(hvd.allreduce_async(x, op=hvd.Min)), x)


def main():
    assert not hvd.is_initialized()
    expect_not_initialized("allreduce", lambda: hvd.allreduce(torch.ones(2)))
    expect_not_initialized("allreduce_async_", lambda: hvd.allreduce_async_(torch.ones(2)))
    expect_not_initialized("rank", hvd.rank)
    hvd.init()
    assert hvd.is_initialized()
    assert (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size()) == (0, 1, 0, 1)
    assert (hvd.cross_rank(), hvd.cross_size()) == (0, 1)
    assert not hvd.mpi_enabled() and not hvd.gloo_enabled()
    size_one_allreduce()
    hvd.shutdown()
    expect_not_initialized("allreduce after shutdown", lambda: hvd.allreduce(torch.ones(2)))
    hvd.init()
    size_one_allreduce()
    hvd.shutdown()
    print("lifecycle ok", flush=True)


if __name__ == "__main__":
    main()
