"""The Spark side of tutti.spark.run_elastic: each task is a slot that runs elastic workers.

A task registers itself in the job's store (its host and attempt), shows that it lives
by bumping a counter, and runs each worker the driver assigns to it as a child process
(tutti.runner.task_worker, which dies with the task) until the driver says stop. Keys,
for the task of partition P:

    spark/slot/P        JSON {"attempt", "host"}      written by the task
    spark/beat/P        a counter                     bumped by the task while it lives
    spark/assign/P      JSON {"attempt", "worker", "env"}   written by the driver
    spark/exit/W        worker W's exit status        written by the task
    spark/kill/W        stop worker W                 written by the driver
    spark/stop          every task stops              written by the driver
"""

import json
import os
import subprocess
import sys
import time

from tutti.runner import environment, gang

from ._imports import pyspark_modules

_POLL_S = 0.1


def final_rank_and_value(fn, args, kwargs):
    """What each elastic worker runs: fn's value with the rank the worker ended with."""
    value = fn(*args, **kwargs)
    return int(os.environ.get("TUTTI_RANK", "-1")), value


class SlotTask:
    """The function of every task of the elastic Spark job (pickled by Spark)."""

    def __init__(self, endpoint, user_env, executable, interface):
        self.endpoint = endpoint
        self.user_env = user_env
        self.executable = executable
        self.interface = interface

    def __call__(self, partition, _rows):
        from tutti.runner.store_client import StoreClient

        _, task_context = pyspark_modules()
        attempt = task_context.TaskContext.get().attemptNumber()
        interface = self.interface or gang.interface_towards(self.endpoint.address)
        host = _address_towards(self.endpoint.address)
        with StoreClient(*self.endpoint) as store:
            store.set("spark/slot/%d" % partition,
                      json.dumps({"attempt": attempt, "host": host}).encode())
            beats, done = 0, set()
            while store.get("spark/stop") is None:
                beats += 1
                store.set("spark/beat/%d" % partition, str(beats).encode())
                data = store.get("spark/assign/%d" % partition)
                assigned = json.loads(data) if data is not None else None
                if (assigned and assigned["attempt"] == attempt
                        and assigned["worker"] not in done):
                    worker = assigned["worker"]
                    code = self._run_worker(store, partition, worker, assigned["env"],
                                            interface)
                    store.set("spark/exit/%d" % worker, str(code).encode())
                    done.add(worker)
                time.sleep(_POLL_S)
        yield partition

    def _run_worker(self, store, partition, worker, job_env, interface):
        env = environment.without_job_variables(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
        env.update({name: str(value) for name, value in self.user_env.items()})
        env.update(job_env)
        env["TUTTI_GLOO_IFACE"] = interface
        entry = "import sys; from tutti.runner.task_worker import main; sys.exit(main())"
        process = subprocess.Popen([self.executable or sys.executable, "-c", entry], env=env,
                                   preexec_fn=gang._die_with_parent)
        beats = 0
        while process.poll() is None:
            beats += 1
            store.set("spark/beat/%d" % partition, ("w%d" % beats).encode())
            if (store.get("spark/kill/%d" % worker) is not None
                    or store.get("spark/stop") is not None):
                process.kill()
            time.sleep(_POLL_S)
        return process.returncode


def _address_towards(address):
    """This machine's address on the route to `address` (how the driver sees the task)."""
    import socket

    if address.startswith("127."):
        return "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((address, 9))  # no packet is sent
        return probe.getsockname()[0]
