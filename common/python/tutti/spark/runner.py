"""tutti.spark.run: one barrier-mode Spark task per rank, each running a tuttirun Gloo worker.

The driver hosts the job's authenticated rendezvous store (tutti.runner.gang.DriverStore)
and puts the pickled function there. Spark starts all the tasks of a barrier stage
together or none; each task works out its rank from the stage's task list, then starts
`python -m tutti.runner.task_worker` (the worker of tutti.runner.run) with the environment
of a tuttirun Gloo rank, so hvd.init() in the function works as under tuttirun. Results
and errors come back through the store. A separate process per rank keeps Spark's reused
Python workers free of the job's state, and dies with its task.
"""

import os
import sys
import threading
import time

from tutti.runner import gang

from ._imports import pyspark_modules

# Horovod's default for HOROVOD_SPARK_START_TIMEOUT.
DEFAULT_START_TIMEOUT_S = 600


def _spark_context():
    pyspark, _ = pyspark_modules()
    context = pyspark.SparkContext._active_spark_context
    if context is None:
        raise RuntimeError("tutti.spark.run needs an active SparkContext; create a "
                           "SparkSession (SparkSession.builder.getOrCreate()) first")
    return context


def task_slots(context):
    """How many tasks of one barrier stage the cluster can run at once now."""
    scala_context = context._jsc.sc()
    profile = scala_context.resourceProfileManager().defaultResourceProfile()
    return int(scala_context.maxNumConcurrentTasks(profile))


def _wait_for_slots(context, num_proc, timeout_s):
    """Waits until the executors offer `num_proc` slots (executors register after the
    session starts); ValueError naming both numbers when they never do."""
    deadline = time.monotonic() + timeout_s
    while True:
        slots = task_slots(context)
        if slots >= num_proc or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    if slots < num_proc:
        raise ValueError(
            "num_proc=%d needs %d concurrent Spark task slots but the cluster (master %s, "
            "spark.task.cpus=%s) offers %d after %.0f s; use num_proc <= %d or add executors"
            % (num_proc, num_proc, context.master, context.getConf().get("spark.task.cpus", "1"),
               slots, timeout_s, slots))


def _driver_address(context):
    """Where the tasks can reach the driver: loopback for a master on this machine."""
    master = context.master
    if master.startswith("local"):
        return "127.0.0.1"
    host = context.getConf().get("spark.driver.host", "127.0.0.1")
    import socket

    return socket.gethostbyname(host)


def _check_arguments(num_proc, use_mpi, extra_mpi_args, stdout, stderr,
                     prefix_output_with_timestamp, nics, start_timeout):
    if num_proc is not None and (not isinstance(num_proc, int) or num_proc < 1):
        raise ValueError("num_proc must be a positive integer, not %r" % (num_proc,))
    if start_timeout is not None and start_timeout <= 0:
        raise ValueError("start_timeout must be positive, not %r" % (start_timeout,))
    if use_mpi:
        raise ValueError("tutti.spark.run runs its workers in Gloo mode only (use_mpi=True is "
                         "not supported: Spark, not mpirun, starts the processes)")
    if extra_mpi_args:
        raise ValueError("extra_mpi_args has no effect: tutti.spark.run does not use mpirun")
    if stdout is not None or stderr is not None or prefix_output_with_timestamp:
        raise ValueError("stdout, stderr and prefix_output_with_timestamp are not supported: "
                         "the workers' output goes to the Spark executors' logs")
    if nics is not None and len(set(nics)) != 1:
        raise ValueError("nics must name exactly one network interface, not %r" % (nics,))


def run(fn, args=(), kwargs={}, num_proc=None, start_timeout=None, use_mpi=None,
        use_gloo=None, extra_mpi_args=None, env=None, stdout=None, stderr=None, verbose=1,
        nics=None, prefix_output_with_timestamp=False, executable=None):
    """Runs fn(*args, **kwargs) on `num_proc` ranks as Spark barrier tasks.

    Returns the results in rank order. num_proc defaults to the context's
    defaultParallelism; start_timeout (seconds, default $TUTTI_SPARK_START_TIMEOUT or
    $HOROVOD_SPARK_START_TIMEOUT or 600) bounds the wait for enough task slots; env adds
    environment variables for the workers; nics names the Gloo network interface;
    executable is the Python the workers run (default: the executors' Python).

    Raises ValueError for bad arguments or too few slots, tutti.runner.WorkerError naming
    the rank when a rank raises, exits or is killed (the whole Spark job is then stopped:
    barrier stages are not retried), RuntimeError when Spark fails the job otherwise.
    """
    _check_arguments(num_proc, use_mpi, extra_mpi_args, stdout, stderr,
                     prefix_output_with_timestamp, nics, start_timeout)
    context = _spark_context()
    if num_proc is None:
        num_proc = context.defaultParallelism
    if start_timeout is None:
        start_timeout = float(os.environ.get("TUTTI_SPARK_START_TIMEOUT")
                              or os.environ.get("HOROVOD_SPARK_START_TIMEOUT")
                              or DEFAULT_START_TIMEOUT_S)
    _wait_for_slots(context, num_proc, start_timeout)

    store = gang.DriverStore(_driver_address(context))
    try:
        store.put_function(fn, args, kwargs)
        task = _RankTask(store.endpoint, dict(env or {}), executable,
                         next(iter(nics)) if nics else None)
        try:
            _run_barrier_stage(context, num_proc, task)
        except Exception as exc:
            failure = store.first_failure(num_proc)
            if failure is not None:
                failure.__suppress_context__ = True  # Spark's own report only repeats it
                raise failure
            raise RuntimeError("the Spark job of tutti.spark.run failed: %s"
                               % _first_line(exc)) from exc
        return store.results(num_proc)
    finally:
        store.close()


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _RankTask:
    """The function each barrier task runs (Spark pickles it; it holds no Spark objects)."""

    def __init__(self, endpoint, user_env, executable, interface):
        self.endpoint = endpoint
        self.user_env = user_env
        self.executable = executable
        self.interface = interface

    def __call__(self, partitions):
        from tutti.runner import environment

        _, task_context = pyspark_modules()
        context = task_context.BarrierTaskContext.get()
        # Task infos come in partition order; ranks are grouped by executor host.
        hosts = [info.address.rsplit(":", 1)[0] for info in context.getTaskInfos()]
        order = gang.rank_order(hosts)
        rank = order.index(context.partitionId())
        placement = gang.place([hosts[index] for index in order])[rank]
        env = environment.without_job_variables(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
        interface = self.interface or gang.interface_towards(self.endpoint.address)
        env.update(self.endpoint.worker_environment(placement, interface, self.user_env))
        gang.run_rank_process(rank, env, self.executable or sys.executable)
        yield rank


def _run_barrier_stage(context, num_proc, task):
    """Runs one barrier stage of `num_proc` tasks in a job group of its own, so that an
    interrupted driver cancels it (Spark then kills the tasks, and each rank's process
    dies with its task)."""
    rdd = context.parallelize(range(num_proc), num_proc).barrier().mapPartitions(task)
    group = "tutti-spark-%d-%d" % (os.getpid(), id(task))
    outcome = {}

    def collect():
        context.setJobGroup(group, "tutti.spark.run on %d ranks" % num_proc,
                            interruptOnCancel=True)
        try:
            outcome["ranks"] = rdd.collect()
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=collect, name="tutti-spark-job", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.1)
    except BaseException:
        context.cancelJobGroup(group)
        raise
    if "error" in outcome:
        raise outcome["error"]
    if sorted(outcome["ranks"]) != list(range(num_proc)):
        raise RuntimeError("the Spark job returned ranks %r, expected 0..%d"
                           % (outcome["ranks"], num_proc - 1))
