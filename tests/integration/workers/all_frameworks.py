"""Imports all three plugins in one process (in the order given on the command line),
initialises each and allreduces through each; prints one line per rank on success."""

import importlib
import os
import sys

import numpy as np


def core_threads():
    names = []
    for tid in os.listdir("/proc/self/task"):
        with open("/proc/self/task/%s/comm" % tid) as comm:
            names.append(comm.read().strip())
    return names.count("tutti-core")


def main(order):
    plugins = {name: importlib.import_module("tutti." + name) for name in order}
    for hvd in plugins.values():
        hvd.init()
    import tutti.common as common

    thread_ids = {name: hvd.background_thread_id() for name, hvd in plugins.items()}
    assert len(set(thread_ids.values())) == 1, thread_ids
    assert thread_ids[order[0]] == common.background_thread_id() != 0
    assert core_threads() == 1, "expected one tutti-core thread, found %d" % core_threads()

    rank, size = common.rank(), common.size()
    assert all(hvd.rank() == rank and hvd.size() == size for hvd in plugins.values())
    expected = np.full((2, 3), float(sum(range(1, size + 1))), dtype=np.float32)
    results = {}
    import torch
    import tensorflow as tf
    import mxnet as mx

    results["torch"] = plugins["torch"].allreduce(
        torch.full((2, 3), rank + 1.0), op=plugins["torch"].Sum, name="t").numpy()
    results["tensorflow"] = plugins["tensorflow"].allreduce(
        tf.fill([2, 3], rank + 1.0), op=plugins["tensorflow"].Sum, name="tf").numpy()
    results["mxnet"] = plugins["mxnet"].allreduce(
        mx.nd.full((2, 3), rank + 1.0), op=plugins["mxnet"].Sum, name="mx").asnumpy()
    for name, value in results.items():
        assert np.array_equal(value, expected), (name, value)
    print("rank %d/%d: one core, thread %d, controller %s" % (
        rank, size, thread_ids[order[0]], common.controller()))


if __name__ == "__main__":
    main(sys.argv[1:] or ["torch", "tensorflow", "mxnet"])
