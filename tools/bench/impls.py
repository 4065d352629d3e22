"""The implementations the benchmark compares.

Every implementation works on the same numpy buffers: `wrap()` turns a buffer into the
object its API takes (itself, or a torch tensor sharing the memory) once, outside the timed
calls. All reductions are float32 sums; allreduce and broadcast work in place everywhere.
Allgather writes into a preallocated output where the API allows it (mpi4py,
torch.distributed); tutti's allgather returns a new array or tensor, as its API does.
"""

import time

import numpy


class Implementation:
    """One library seen through one API. `mode` names the tutti session it needs (None: tutti
    must be shut down while it runs, so the core's background thread stays out of the way)."""

    name = ""
    mode = None

    def wrap(self, array):
        return array

    def allreduce(self, buf, name):
        raise NotImplementedError

    def allgather(self, buf, out, name):
        """Returns the gathered result (a numpy array or a tensor)."""
        raise NotImplementedError

    def broadcast(self, buf, name):
        raise NotImplementedError

    def allreduce_many(self, bufs, prefix):
        """Submits an allreduce of every buffer, then waits for all of them. tutti's
        implementations also set `last_submit_s`: how long the submissions took."""
        raise NotImplementedError

    # Set by implementations with Horovod's grouped API: all buffers in one call.
    allreduce_group = None


class Mpi4py(Implementation):
    """Raw MPI: mpi4py's buffer interface on numpy arrays (the reference for every ratio)."""

    name = "mpi4py"

    def __init__(self, comm):
        from mpi4py import MPI

        self._comm = comm
        self._in_place = MPI.IN_PLACE
        self._sum = MPI.SUM

    def allreduce(self, buf, name):
        self._comm.Allreduce(self._in_place, buf, op=self._sum)

    def allgather(self, buf, out, name):
        self._comm.Allgather(buf, out)
        return out

    def broadcast(self, buf, name):
        self._comm.Bcast(buf, root=0)

    def allreduce_many(self, bufs, prefix):
        # MPI has no fusion: one call per buffer (the baseline is one 4 MB call,
        # measured separately).
        for buf in bufs:
            self._comm.Allreduce(self._in_place, buf, op=self._sum)


class TorchGloo(Implementation):
    """torch.distributed with the Gloo backend on CPU tensors."""

    name = "torch-gloo"

    def __init__(self, size):
        import torch
        import torch.distributed as dist

        self._torch = torch
        self._dist = dist
        self._size = size
        self._sum = dist.ReduceOp.SUM
        # The single-tensor allgather (all_gather_into_tensor before torch 2.13).
        self._gather_into = getattr(dist, "all_gather_single", None) or getattr(
            dist, "all_gather_into_tensor", None)

    def wrap(self, array):
        return self._torch.from_numpy(array)

    def allreduce(self, buf, name):
        self._dist.all_reduce(buf, op=self._sum)

    def allgather(self, buf, out, name):
        if self._gather_into is not None:
            try:
                self._gather_into(out, buf)
                return out
            except RuntimeError:
                # Some torch builds lack a fused allgather on Gloo; use the list form.
                self._gather_into = None
        self._dist.all_gather(list(out.chunk(self._size)), buf)
        return out

    def broadcast(self, buf, name):
        self._dist.broadcast(buf, src=0)

    def allreduce_many(self, bufs, prefix):
        works = [self._dist.all_reduce(buf, op=self._sum, async_op=True) for buf in bufs]
        for work in works:
            work.wait()


class _HorovodApi(Implementation):
    """The calls of Horovod's API, shared by tutti.numpy, tutti.torch and Horovod itself
    (their APIs are the same); `self._hvd` is the module."""

    def allreduce(self, buf, name):
        self._hvd.allreduce_(buf, op=self._hvd.Sum, name=name)

    def allgather(self, buf, out, name):
        return self._hvd.allgather(buf, name=name)

    def broadcast(self, buf, name):
        self._hvd.broadcast_(buf, root_rank=0, name=name)

    def allreduce_many(self, bufs, prefix):
        self.last_submit_s = _submit_then_wait(self._hvd, bufs, prefix)

    def allreduce_group(self, bufs, prefix):
        """The same buffers submitted in one call (grouped_allreduce_async_), then awaited."""
        start = time.perf_counter()
        handle = self._hvd.grouped_allreduce_async_(bufs, op=self._hvd.Sum, name=prefix)
        self.last_submit_s = time.perf_counter() - start
        self._hvd.synchronize(handle)


class TuttiNumpy(_HorovodApi):
    """tutti through tutti.numpy."""

    def __init__(self, mode):
        import tutti.numpy as hvd

        self._hvd = hvd
        self.mode = mode
        self.name = "tutti-%s-np" % mode.name


class _HorovodApiOnTorch(_HorovodApi):
    """Horovod's API on CPU tensors (tutti.torch and horovod.torch)."""

    def wrap(self, array):
        return self._torch.from_numpy(array)


class TuttiTorch(_HorovodApiOnTorch):
    """tutti through tutti.torch on CPU tensors."""

    def __init__(self, mode):
        import torch

        import tutti.torch as hvd

        self._torch = torch
        self._hvd = hvd
        self.mode = mode
        self.name = "tutti-%s-torch" % mode.name


def _submit_then_wait(hvd, bufs, prefix):
    """tutti's allreduce_many through either API; returns the seconds spent submitting."""
    start = time.perf_counter()
    handles = [hvd.allreduce_async_(buf, op=hvd.Sum, name="%s.%d" % (prefix, i))
               for i, buf in enumerate(bufs)]
    submitted = time.perf_counter() - start
    for handle in handles:
        hvd.synchronize(handle)
    return submitted


# The core's counters that say which of tutti's algorithms a row's calls took, under the
# names the rows report them by: single copies, streamed allreduces, and allreduces in all.
ROW_COUNTERS = {"single_copy_calls": "shm_single_copy_calls",
                "streaming_calls": "shm_streaming_calls",
                "collectives": "allreduce_collectives"}


def tutti_counts(impl):
    """For tutti's implementations, the running session's ROW_COUNTERS (one read of the
    core's counters); None for the others."""
    if not isinstance(impl, (TuttiNumpy, TuttiTorch)):
        return None
    import tutti.common

    counters = tutti.common.counters()
    return {key: counters[name] for key, name in ROW_COUNTERS.items()}


def add_counts(entry, before, after, keys):
    """Adds what each counter in `keys` rose by from `before` to `after` to `entry`."""
    for key in keys:
        entry[key] = entry.get(key, 0) + after[key] - before[key]


def as_numpy(result):
    """A numpy view of a result returned by any implementation (for verification)."""
    if isinstance(result, numpy.ndarray):
        return result
    return result.numpy()


class HorovodTorch(_HorovodApiOnTorch):
    """Horovod 0.28.1 through horovod.torch on CPU tensors (`--peers horovod`; runs in its
    own job under the Horovod benchmark environment, see horovod_worker.py). The same calls
    as TuttiTorch: Horovod's API is tutti's."""

    def __init__(self, hvd, controller):
        import torch

        self._torch = torch
        self._hvd = hvd
        self.name = "horovod-%s-torch" % controller
