"""tutti.spark.run_elastic: elastic training with Spark tasks as the slots (Horovod's API).

The driver starts one long-running Spark task per slot (max_np of them; not a barrier
stage, so Spark may start them as executors come and retry a lost one). Each task
registers its host in the job's store (elastic_task.py); the registered, living tasks are
the host discovery of tutti's elastic driver (the one of `tuttirun
--host-discovery-script`), and each worker the driver starts runs in a free task of its
host. A worker that fails or whose task is lost blacklists its host and re-forms the job
from the last commit, as under tuttirun.
"""

import json
import os
import queue
import sys
import threading
import time
import types

from tutti.runner import gang, gloo_job, hosts, serialization
from tutti.runner.elastic.driver import ElasticDriver
from tutti.runner.task_worker import FUNCTION_KEY, RESULT_KEY

from .elastic_task import SlotTask, final_rank_and_value
from .runner import (DEFAULT_START_TIMEOUT_S, _check_arguments, _driver_address,
                     _spark_context)

# A task whose counter has not moved for this long is taken for lost (its executor died).
LOST_AFTER_S = 10.0
DEFAULT_ELASTIC_TIMEOUT_S = 600
# The driver's messages name tuttirun's flags; run_elastic's users know these names.
_NAMES = {"--min-np": "min_np", "--max-np": "max_np", "--elastic-timeout": "elastic_timeout",
          "--reset-limit": "reset_limit"}


class _Slots:
    """The tasks as the driver sees them: {partition: (attempt, host)} of the living ones."""

    def __init__(self, store, count):
        self._store = store
        self._count = count
        self._beats = {}   # partition -> (last counter, when it last changed)

    def living(self):
        found, now = {}, time.monotonic()
        for partition in range(self._count):
            slot = self._store.get("spark/slot/%d" % partition)
            beat = self._store.get("spark/beat/%d" % partition)
            if slot is None or beat is None:
                continue
            last = self._beats.get(partition)
            if last is None or last[0] != beat:
                self._beats[partition] = last = (beat, now)
            if now - last[1] < LOST_AFTER_S:
                info = json.loads(slot)
                found[partition] = (info["attempt"], info["host"])
        return found


class _Discovery:
    def __init__(self, slots):
        self._slots = slots

    def find(self):
        counts = {}
        for _, host in self._slots.living().values():
            counts[host] = counts.get(host, 0) + 1
        return [hosts.Host(name, count) for name, count in sorted(counts.items())]


class _TaskPool:
    """The driver's worker pool: a worker is started by assigning it to a free task."""

    def __init__(self, store, slots):
        self.exits = queue.Queue()
        self.succeeded = []      # worker ids that exited with status 0
        self._store = store
        self._slots = slots
        self._busy = {}          # partition -> (attempt, worker id)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, daemon=True,
                                         name="tutti-spark-elastic-exits")
        self._watcher.start()

    def start(self, worker_id, spec):
        host, env = spec
        with self._lock:
            for partition, (attempt, where) in sorted(self._slots.living().items()):
                if where == host and partition not in self._busy:
                    self._busy[partition] = (attempt, worker_id)
                    self._store.set("spark/assign/%d" % partition, json.dumps(
                        {"attempt": attempt, "worker": worker_id, "env": env}).encode())
                    return
        raise OSError("no free Spark task on host %s" % host)

    def stop(self, worker_ids):
        for worker_id in worker_ids:
            self._store.set("spark/kill/%d" % worker_id, b"1")

    def stop_all(self):
        self._store.set("spark/stop", b"1")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with self._lock:
                if not self._busy:
                    break
            time.sleep(0.1)
        self._stop.set()
        self._watcher.join(5)

    def _watch(self):
        while not self._stop.is_set():
            with self._lock:
                living = self._slots.living()
                for partition, (attempt, worker_id) in list(self._busy.items()):
                    code = self._store.get("spark/exit/%d" % worker_id)
                    if code is not None:
                        code = int(code)
                        if code == 0:
                            self.succeeded.append(worker_id)
                    elif living.get(partition, (None,))[0] != attempt:
                        code = 1  # the task was lost (its executor died) or retried
                    else:
                        continue
                    del self._busy[partition]
                    self.exits.put((worker_id, code))
            time.sleep(0.1)


class _SparkDriver(ElasticDriver):
    def _launch(self, worker_id, host):
        placement = hosts.Placement(worker_id, 1, host, 0, 1, 0, 1, False)
        env = self.worker_environment(worker_id, placement)
        env.update({"TUTTI_RUN_STORE_ADDR": self._store_address,
                    "TUTTI_RUN_STORE_PORT": str(self._store.port),
                    "TUTTI_RUN_SECRET": self._secret})
        return (host, env), "worker %d: a Spark task on %s" % (worker_id, host)


def run_elastic(fn, args=(), kwargs={}, num_proc=None, min_np=None, max_np=None,
                start_timeout=None, elastic_timeout=None, reset_limit=None, env=None,
                stdout=None, stderr=None, verbose=1, nics=None,
                prefix_output_with_timestamp=False, executable=None):
    """Runs fn(*args, **kwargs) as an elastic job on Spark tasks; the values of the workers
    of the last generation in rank order.

    num_proc (default defaultParallelism) is the first generation's size; min_np and max_np
    default to num_proc, as in Horovod; max_np tasks are started. elastic_timeout (default
    $HOROVOD_ELASTIC_TIMEOUT, then 600) bounds the time below min_np; reset_limit the
    re-formations. RuntimeError with the reason when the job stops.
    """
    _check_arguments(num_proc, None, None, stdout, stderr, prefix_output_with_timestamp,
                     nics, start_timeout)
    context = _spark_context()
    num_proc = num_proc or context.defaultParallelism
    min_np = num_proc if min_np is None else min_np
    max_np = num_proc if max_np is None else max_np
    if elastic_timeout is None:
        elastic_timeout = float(os.environ.get("HOROVOD_ELASTIC_TIMEOUT",
                                               DEFAULT_ELASTIC_TIMEOUT_S))
    _check_limits(num_proc, min_np, max_np, reset_limit, elastic_timeout)
    address = _driver_address(context)
    secret = gloo_job.new_secret()
    store = gloo_job.start_store(address, secret)
    store.set(FUNCTION_KEY, serialization.dumps(
        (final_rank_and_value, (fn, tuple(args), dict(kwargs or {})), {})))
    endpoint = gang.StoreEndpoint(address, store.port, secret)
    task = SlotTask(endpoint, dict(env or {}), executable, next(iter(nics)) if nics else None)
    spark_job = _SparkJob(context, max_np, task)
    slots = _Slots(store, max_np)
    pool = _TaskPool(store, slots)
    messages = []
    try:
        discovery = _Discovery(slots)
        initial = _wait_for_tasks(discovery, min_np, start_timeout, spark_job)
        settings = types.SimpleNamespace(
            np=num_proc, min_np=min_np, max_np=max_np, elastic_timeout=elastic_timeout,
            reset_limit=reset_limit, blacklist_cooldown_range=None, verbose=verbose > 1,
            command=None)

        def log(message):
            for flag, name in _NAMES.items():
                message = message.replace(flag, name)
            messages.append(message)
            if verbose:
                sys.stderr.write("tutti.spark: %s\n" % message)

        driver = _SparkDriver(settings, store, secret, address, None, pool, discovery,
                              initial, hosts.resolve_all([h.name for h in initial]), log=log)
        code = driver.run()
        if code != 0:
            errors = [m[len("error: "):] for m in messages if m.startswith("error: ")]
            raise RuntimeError("the elastic Spark job failed: %s"
                               % (errors[-1] if errors else "exit code %d" % code))
        results = []
        for worker_id in pool.succeeded:
            record = serialization.loads(store.get(RESULT_KEY % worker_id))
            results.append(record[1])
        return [value for _, value in sorted(results, key=lambda item: item[0])]
    finally:
        pool.stop_all()
        spark_job.finish()
        store.close()


def _check_limits(num_proc, min_np, max_np, reset_limit, elastic_timeout):
    for name, value in (("min_np", min_np), ("max_np", max_np)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError("%s must be a positive integer, not %r" % (name, value))
    if not min_np <= num_proc <= max_np:
        raise ValueError("need min_np <= num_proc <= max_np, not %d, %d, %d"
                         % (min_np, num_proc, max_np))
    if reset_limit is not None and (not isinstance(reset_limit, int) or reset_limit < 0):
        raise ValueError("reset_limit must be an integer of at least 0, not %r" % (reset_limit,))
    if not elastic_timeout > 0:
        raise ValueError("elastic_timeout must be positive, not %r" % (elastic_timeout,))


def _wait_for_tasks(discovery, min_np, start_timeout, spark_job):
    """The hosts once min_np tasks registered; TimeoutError after start_timeout."""
    if start_timeout is None:
        start_timeout = float(os.environ.get("TUTTI_SPARK_START_TIMEOUT")
                              or os.environ.get("HOROVOD_SPARK_START_TIMEOUT")
                              or DEFAULT_START_TIMEOUT_S)
    deadline = time.monotonic() + start_timeout
    while True:
        found = discovery.find()
        if sum(h.slots for h in found) >= min_np:
            return found
        spark_job.check()
        if time.monotonic() > deadline:
            raise TimeoutError("only %d Spark task(s) started within %g s (start_timeout); "
                               "min_np=%d needs more executors or cores"
                               % (sum(h.slots for h in found), start_timeout, min_np))
        time.sleep(0.2)


class _SparkJob:
    """The Spark job of the slot tasks, collected in a thread of its own job group."""

    def __init__(self, context, count, task):
        self._context = context
        self._group = "tutti-spark-elastic-%d-%d" % (os.getpid(), id(task))
        self._outcome = {}
        rdd = context.parallelize(range(count), count).mapPartitionsWithIndex(task)

        def collect():
            context.setJobGroup(self._group, "tutti.spark.run_elastic", interruptOnCancel=True)
            try:
                self._outcome["partitions"] = rdd.collect()
            except BaseException as exc:
                self._outcome["error"] = exc

        self._thread = threading.Thread(target=collect, daemon=True,
                                        name="tutti-spark-elastic-job")
        self._thread.start()

    def check(self):
        if "error" in self._outcome:
            raise RuntimeError("the Spark job of tutti.spark.run_elastic failed: %s"
                               % str(self._outcome["error"]).strip().splitlines()[0])

    def finish(self):
        self._thread.join(30)
        if self._thread.is_alive():
            self._context.cancelJobGroup(self._group)
            self._thread.join(30)

