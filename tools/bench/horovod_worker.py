"""One rank of Horovod 0.28.1's job in a `--peers horovod` launch (docs/benchmarks.md).

    <horovod-venv>/bin/python horovod_worker.py CONFIG.json mpi     # under mpirun
    <horovod-venv>/bin/python horovod_worker.py CONFIG.json gloo    # under horovodrun --gloo

Runs the same sweep, 100 x 40 KiB and isolated-latency tests as worker.py (the same
functions, sizes and sample counts) through horovod.torch, taking turns with tutti's job
(peers.py). Imports nothing of tutti. Rank 0 writes its rows to the config's "result" path
with ".horovod-CONTROLLER" appended.
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import impls as impl_mod  # noqa: E402
import peers  # noqa: E402
import worker  # noqa: E402


class HorovodComm:
    """The few communicator calls measure.py and worker.py make, through Horovod itself (its
    Gloo job has no MPI). Only used outside the timed calls."""

    def __init__(self, hvd):
        self._hvd = hvd
        self.rank, self.size = hvd.rank(), hvd.size()
        self._count = 0

    def _name(self, what):
        self._count += 1
        return "bench.comm.%s.%d" % (what, self._count)

    def Barrier(self):
        self._hvd.allgather_object(None, name=self._name("barrier"))

    def allgather(self, value):
        return self._hvd.allgather_object(value, name=self._name("allgather"))

    def gather(self, value, root=0):
        values = self.allgather(value)
        return values if self.rank == root else None


def main():
    config_path, controller = sys.argv[1], sys.argv[2]
    with open(config_path) as stream:
        config = json.load(stream)
    import horovod
    import torch

    import horovod.torch as hvd

    torch.set_num_threads(1)  # as tutti's job: one compute thread per rank
    began = time.perf_counter()
    if controller == "mpi":
        # As in tutti's job, mpi4py initializes MPI (MPI_THREAD_MULTIPLE); Horovod uses it.
        from mpi4py import MPI
    hvd.init()
    running = "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else "?"
    if running != controller:
        raise RuntimeError("Horovod started the %r controller, expected %r" % (running, controller))
    comm = MPI.COMM_WORLD if controller == "mpi" else HorovodComm(hvd)
    impl = impl_mod.HorovodTorch(hvd, controller)
    groups = [worker.Group(None, [impl])]
    sessions = worker.NoSessions()
    baton = peers.Baton(config.get("peers_dir"), "horovod-" + controller, comm.rank,
                        comm.Barrier)
    baton.ready()
    result = {"impls": [impl.name],
              "versions": {"horovod": horovod.__version__, "horovod_torch": torch.__version__}}
    if config["sizes"]:
        result["sweep"] = worker.sweep(comm, config, groups, sessions, baton)
    if config["fused_count"]:
        result["fused"] = worker.fused(comm, config, groups, sessions, baton)
    if config["latency_samples"]:
        result["latency"] = worker.latency(comm, config, groups, sessions, baton)
    result["elapsed_s"] = time.perf_counter() - began
    if comm.rank == 0:
        with open("%s.horovod-%s" % (config["result"], controller), "w") as stream:
            json.dump(result, stream)
    hvd.shutdown()


if __name__ == "__main__":
    main()
