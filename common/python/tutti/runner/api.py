"""tutti.runner.run: call a Python function on N ranks and collect what each returns.

    from tutti.runner import run

    def work(scale):
        import tutti.torch as hvd
        hvd.init()
        return hvd.rank() * scale

    run(work, args=(10,), np=2)   # -> [0, 10]

The function is pickled (by value with cloudpickle when it is installed, otherwise by
reference, so it must then be importable by the workers) and placed in a store that the
launcher hosts for this call only; each worker fetches it, calls it and stores its result
(or its exception and traceback) there. Workers start with the caller's sys.path as
PYTHONPATH, so modules the caller can import are importable by the workers too.
"""

import os
import sys

from . import launch, options, serialization, tuning
from .gloo_job import new_secret
from .store import StoreServer
from .task_worker import FUNCTION_KEY, RESULT_KEY


class WorkerError(RuntimeError):
    """A rank failed. `rank` is the rank, `traceback` the worker's traceback text (or "").

    When the worker's exception could be pickled it is also attached as __cause__.
    """

    def __init__(self, rank, message, traceback_text=""):
        super().__init__("rank %d: %s%s" % (rank, message,
                                            "\n\n" + traceback_text if traceback_text else ""))
        self.rank = rank
        self.traceback = traceback_text


def _launcher_argv(np, hosts, hostfile, use_mpi, network_interface, output_filename, verbose,
                   settings):
    argv = ["-np", str(np)]
    if hosts:
        argv += ["-H", hosts if isinstance(hosts, str) else ",".join(hosts)]
    if hostfile:
        argv += ["--hostfile", hostfile]
    argv.append("--mpi" if use_mpi else "--gloo")
    if network_interface:
        argv += ["--network-interface", network_interface]
    if output_filename:
        argv += ["--output-filename", output_filename]
    if verbose:
        argv.append("--verbose")
    known = {tuning.dest(item.flag): item for item in tuning.TUNINGS}
    known_switches = {name for name, item in known.items() if item.kind is None}
    for name, value in settings.items():
        if name == "stop_grace_seconds":
            argv += ["--stop-grace-seconds", str(value)]
            continue
        if name not in known:
            raise TypeError("run() got an unexpected setting %r" % name)
        if name in known_switches:
            if value:
                argv.append(known[name].flag)
        elif value is not None:
            argv += [known[name].flag, str(value)]
    return argv


def _worker_error(result, np, store):
    """The WorkerError to raise for a failed job."""
    records = {}
    for rank in range(np):
        data = store.get(RESULT_KEY % rank)
        if data is not None:
            record = serialization.loads(data)
            if record[0] == "error":
                records[rank] = record
    if result.failed_rank in records:
        rank = result.failed_rank
    elif records:
        rank = min(records)
    elif result.failed_rank is not None:
        return WorkerError(result.failed_rank,
                           "exited with code %d before reporting a result" % result.exit_code)
    else:
        return WorkerError(0, "the job ended with exit code %d" % result.exit_code)
    _, summary, text, pickled = records[rank]
    error = WorkerError(rank, summary, text)
    if pickled is not None:
        error.__cause__ = serialization.loads(pickled)
    return error


def run(fn, args=(), kwargs=None, np=2, hosts=None, hostfile=None, use_mpi=False, env=None,
        network_interface=None, output_filename=None, verbose=False, **settings):
    """Runs fn(*args, **kwargs) on `np` ranks; returns the results in rank order.

    hosts: "host1:2,host2:2" or a list of "host:slots" (default: this host); use_mpi: run
    through mpirun instead of Gloo; env: extra environment variables for the workers;
    settings: tuttirun's tuning flags by attribute name (fusion_threshold_mb=32,
    cycle_time_ms=2, autotune=True, stop_grace_seconds=1, ...).

    Raises ValueError for bad settings, WorkerError (with the worker's traceback) when a
    rank fails, KeyboardInterrupt when the job is interrupted (SIGINT) and RuntimeError
    when it is stopped by another signal.
    """
    argv = _launcher_argv(np, hosts, hostfile, use_mpi, network_interface, output_filename,
                          verbose, settings)
    argv += [sys.executable, "-m", "tutti.runner.task_worker"]
    parsed = options.parse(argv)
    plan = launch.make_plan(parsed)
    secret = new_secret()
    with StoreServer(plan.store_address, secret) as store:
        store.set(FUNCTION_KEY, serialization.dumps((fn, tuple(args), dict(kwargs or {}))))
        extra_env = {"PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
        extra_env.update({name: str(value) for name, value in (env or {}).items()})
        extra_env.update({
            "TUTTI_RUN_STORE_ADDR": plan.store_address,
            "TUTTI_RUN_STORE_PORT": str(store.port),
            "TUTTI_RUN_SECRET": secret,
        })
        result = launch.execute(parsed, plan, extra_env)
        if result.signal_name == "SIGINT":
            raise KeyboardInterrupt()
        if result.signal_name is not None:
            raise RuntimeError("the job was stopped by %s" % result.signal_name)
        if result.exit_code != 0:
            raise _worker_error(result, np, store)
        values = []
        for rank in range(np):
            data = store.get(RESULT_KEY % rank)
            if data is None:
                raise WorkerError(rank, "exited without reporting a result")
            values.append(serialization.loads(data)[1])
        return values
