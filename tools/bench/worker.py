"""One rank of the benchmark (started by collectives.py under mpirun).

    python worker.py CONFIG.json

Every rank uses three libraries in this one process: mpi4py (MPI is initialized by mpi4py
with MPI_THREAD_MULTIPLE), torch.distributed with the Gloo backend (rendezvous through a
FileStore), and tutti, switched between its modes by sessions.Sessions. Measurements are
interleaved: the implementations take turns, each turn taking a share of the samples, so
slow phases of a shared machine hit all of them. Rank 0 writes the samples to the config's
"result" path.

With `--peers horovod` the same functions also run Horovod's job (horovod_worker.py), and
every (size, round) of the sweep and every round of the other tests is one turn of the
launch's turn-taking (peers.py).
"""

import json
import os
import sys
import time

import numpy

import impls as impl_mod
import measure
import peers
import sessions as sessions_mod


class Group:
    """Implementations that run under the same tutti session (mode None: no session)."""

    def __init__(self, mode, members):
        self.mode = mode
        self.members = members


def build_groups(comm, config):
    wanted = config["impls"]

    def keep(impl):
        return not wanted or any(impl.name == w or impl.name.startswith(w + "-")
                                 for w in wanted)

    groups = [Group(None, [impl_mod.Mpi4py(comm)]), Group(None, [impl_mod.TorchGloo(comm.size)])]
    for mode in sessions_mod.modes(config["shm"]):
        groups.append(Group(mode, [impl_mod.TuttiNumpy(mode), impl_mod.TuttiTorch(mode)]))
    for group in groups:
        group.members = [impl for impl in group.members if keep(impl)]
    return [group for group in groups if group.members]


def rotated(items, start):
    start %= len(items)
    return items[start:] + items[:start]


def fail(what, detail):
    raise AssertionError("wrong result from %s: %s" % (what, detail))


# ---- one collective of one implementation: check on known data, then time ----

def prepare(impl, collective, comm, x, out, name):
    """Runs the collective once on known data, checks the result, and returns the call to
    time (with the input reset where repeated calls would change it)."""
    n, rank = comm.size, comm.rank
    what = "%s %s of %d bytes" % (impl.name, collective, x.nbytes)
    xw = impl.wrap(x)
    x.fill(rank + 1)
    if collective == "allreduce":
        impl.allreduce(xw, name)
        if not numpy.all(x == n * (n + 1) / 2):
            fail(what, "expected %s everywhere, got %s" % (n * (n + 1) / 2, x[:4]))
        x.fill(0)  # sums of zeros stay zero, so repeated in-place calls do the same work
        return lambda: impl.allreduce(xw, name)
    if collective == "allgather":
        outw = impl.wrap(out)
        result = impl_mod.as_numpy(impl.allgather(xw, outw, name)).reshape(n, -1)
        for r in range(n):
            if not numpy.all(result[r] == r + 1):
                fail(what, "block %d holds %s, expected %d" % (r, result[r][:4], r + 1))
        return lambda: impl.allgather(xw, outw, name)
    if collective == "broadcast":
        impl.broadcast(xw, name)
        if not numpy.all(x == 1):
            fail(what, "expected rank 0's 1.0 everywhere, got %s" % x[:4])
        return lambda: impl.broadcast(xw, name)
    raise ValueError("unknown collective %r" % collective)


class NoSessions:
    """For jobs without tutti (Horovod's)."""

    def activate(self, mode):
        pass


INERT = peers.Baton(None, None, 0, None)


def sweep(comm, config, groups, sessions, baton=INERT):
    """For each size, `rounds` turns of every group; each turn takes its share of every
    cell's samples, so a noisy spell of the machine is shared out among the
    implementations instead of spoiling one of them."""
    rows = {}
    n, rounds = comm.size, config["rounds"]
    for index, size in enumerate(config["sizes"]):
        began = time.perf_counter()
        x = numpy.zeros(size // 4, dtype=numpy.float32)
        out = numpy.zeros(n * (size // 4), dtype=numpy.float32)
        plans = {}  # (impl, collective) -> (call, calls per sample, samples per round)
        for round_index in range(rounds):
            with baton.turn():
                sweep_turn(comm, config, groups, sessions, size, x, out, plans, rows,
                           index + round_index)
                if baton.directory:
                    sessions.activate(None)  # no tutti thread while the peers run
        sessions.activate(None)
        del x, out
        if comm.rank == 0:
            print("bench: %d ranks, %d bytes done in %.1f s"
                  % (n, size, time.perf_counter() - began), file=sys.stderr, flush=True)
    return list(rows.values())


def sweep_turn(comm, config, groups, sessions, size, x, out, plans, rows, rotation):
    """One turn of the sweep at one size: every group runs its share of every cell."""
    rounds = config["rounds"]
    for group in rotated(groups, rotation):
        sessions.activate(group.mode)
        for impl in group.members:
            for collective in config["collectives"]:
                key = (impl.name, collective)
                name = "bench.%s.%s.%d" % (impl.name, collective, size)
                # Every turn checks the result once more: that also resets the
                # input and warms up a freshly started tutti session.
                call = prepare(impl, collective, comm, x, out, name)
                if key not in plans:
                    calls, count = measure.plan(
                        comm, call, config["target_s"], config["max_calls"],
                        config["samples"], config["min_samples"],
                        config["cell_budget_s"])
                    plans[key] = (calls, -(-count // rounds))
                calls, share = plans[key]
                before = impl_mod.tutti_counts(impl)
                times = measure.samples(comm, call, share, calls)
                if comm.rank == 0:
                    row = rows.setdefault((collective, size, impl.name), {
                        "collective": collective, "bytes": size, "impl": impl.name,
                        "calls_per_sample": calls, "samples_s": []})
                    row["samples_s"] += times
                    if before is not None:  # which of tutti's shared-memory algorithms ran
                        impl_mod.add_counts(row, before, impl_mod.tutti_counts(impl),
                                            ("single_copy_calls", "streaming_calls"))


# ---- 100 small tensors submitted at once ----

def fused(comm, config, groups, sessions, baton=INERT):
    """`count` buffers of `each` bytes, all submitted, then all waited for. The reference is
    mpi4py reducing one buffer of the same total size in one call."""
    count, each = config["fused_count"], config["fused_bytes"]
    n, rank = comm.size, comm.rank
    bufs = [numpy.zeros(each // 4, dtype=numpy.float32) for _ in range(count)]
    whole = numpy.zeros(count * each // 4, dtype=numpy.float32)
    mpi = None
    results = {}
    rounds = config["test_rounds"]
    for round_index in range(rounds):
        with baton.turn():
            for group in rotated(groups, round_index):
                sessions.activate(group.mode)
                items = []
                for impl in group.members:
                    wrapped = [impl.wrap(b) for b in bufs]
                    prefix = "bench.%s.fused" % impl.name
                    label = "%s %d x %d B" % (impl.name, count, each)
                    for b in bufs:
                        b.fill(rank + 1)
                    impl.allreduce_many(wrapped, prefix)
                    for b in bufs:
                        if not numpy.all(b == n * (n + 1) / 2):
                            fail(label, "expected %s, got %s" % (n * (n + 1) / 2, b[:4]))
                        b.fill(0)
                    items.append((impl.name, label, count, impl,
                                  lambda i=impl, w=wrapped, p=prefix: i.allreduce_many(w, p)))
                    if impl.allreduce_group is not None:
                        # The same buffers in one grouped call: one crossing into the core.
                        key, prefix = impl.name + "-grouped", prefix + ".grouped"
                        label = "%s %d x %d B, one grouped call" % (impl.name, count, each)
                        for b in bufs:
                            b.fill(rank + 1)
                        impl.allreduce_group(wrapped, prefix)
                        for b in bufs:
                            if not numpy.all(b == n * (n + 1) / 2):
                                fail(label, "expected %s, got %s" % (n * (n + 1) / 2, b[:4]))
                            b.fill(0)
                        items.append((key, label, count, impl,
                                      lambda i=impl, w=wrapped, p=prefix: i.allreduce_group(w, p)))
                    if impl.name == "mpi4py":
                        mpi = mpi or impl_mod.Mpi4py(comm)
                        whole.fill(rank + 1)
                        mpi.allreduce(whole, "whole")
                        if not numpy.all(whole == n * (n + 1) / 2):
                            fail("mpi4py 1 x %d B" % whole.nbytes, "got %s" % whole[:4])
                        whole.fill(0)
                        wholew = mpi.wrap(whole)
                        items.append(("mpi4py-1-buffer", "mpi4py 1 x %d B" % whole.nbytes, 1,
                                      None, lambda: mpi.allreduce(wholew, "whole")))
                for key, label, buffers, impl, call in items:
                    submits = []  # this rank's submission time in each call (tutti only)

                    def timed(call=call, impl=impl, submits=submits):
                        call()
                        if hasattr(impl, "last_submit_s"):
                            submits.append(impl.last_submit_s)
                    before = impl_mod.tutti_counts(impl)
                    times = measure.samples(comm, timed, max(1, config["fused_samples"] // rounds))
                    submits = comm.gather(submits, root=0)
                    if rank == 0:
                        entry = results.setdefault(key, {"impl": key, "label": label,
                                                         "buffers": buffers,
                                                         "bytes": count * each, "samples_s": [],
                                                         "submit_samples_s": []})
                        entry["samples_s"].extend(times)
                        entry["submit_samples_s"].extend(max(s) for s in zip(*submits))
                        if before is not None:  # which shared-memory algorithm ran, how often
                            impl_mod.add_counts(entry, before, impl_mod.tutti_counts(impl),
                                                impl_mod.ROW_COUNTERS)
            if baton.directory:
                sessions.activate(None)
    sessions.activate(None)
    return list(results.values())


# ---- isolated 4-byte allreduce ----

def latency(comm, config, groups, sessions, baton=INERT):
    x = numpy.zeros(1, dtype=numpy.float32)
    results = {}
    rounds = config["test_rounds"]
    for round_index in range(rounds):
        with baton.turn():
            for group in rotated(groups, round_index):
                sessions.activate(group.mode)
                for impl in group.members:
                    name = "bench.%s.latency" % impl.name
                    call = prepare(impl, "allreduce", comm, x, None, name)
                    times = measure.samples(comm, call, max(1, config["latency_samples"] // rounds),
                                            idle_s=config["latency_idle_s"])
                    if comm.rank == 0:
                        results.setdefault(impl.name, {"impl": impl.name, "bytes": 4,
                                                       "idle_s": config["latency_idle_s"],
                                                       "samples_s": []})["samples_s"].extend(times)
            if baton.directory:
                sessions.activate(None)
    sessions.activate(None)
    return list(results.values())


def versions():
    import mpi4py
    import torch
    from mpi4py import MPI

    import tutti.common

    library = MPI.Get_library_version().strip().splitlines()[0]
    return {"tutti": tutti.common.__version__, "torch": torch.__version__,
            "mpi4py": mpi4py.__version__, "numpy": numpy.__version__,
            "MPI": library.split(",")[0]}


def init_torch_distributed(comm, config):
    import torch.distributed as dist

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    store = dist.FileStore(config["torch_store"], comm.size)
    dist.init_process_group("gloo", store=store, rank=comm.rank, world_size=comm.size)
    return dist


def main():
    with open(sys.argv[1]) as stream:
        config = json.load(stream)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    import torch

    # Two ranks per two cores: torch's intra-op threads would only fight the ranks.
    torch.set_num_threads(1)
    began = time.perf_counter()
    dist = init_torch_distributed(comm, config)
    sessions = sessions_mod.Sessions(comm)
    groups = build_groups(comm, config)
    baton = peers.Baton(config.get("peers_dir"), "tutti", comm.rank, comm.Barrier)
    baton.ready()
    result = {"np": comm.size, "impls": [impl.name for g in groups for impl in g.members],
              "versions": versions()}
    if config["sizes"]:
        result["sweep"] = sweep(comm, config, groups, sessions, baton)
    if config["fused_count"]:
        result["fused"] = fused(comm, config, groups, sessions, baton)
    if config["latency_samples"]:
        result["latency"] = latency(comm, config, groups, sessions, baton)
    result["tutti_inits"] = sessions.inits
    sessions.close()
    dist.destroy_process_group()
    result["elapsed_s"] = time.perf_counter() - began
    if comm.rank == 0:
        with open(config["result"], "w") as stream:
            json.dump(result, stream)


if __name__ == "__main__":
    main()
