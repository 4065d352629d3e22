"""The workers of an elastic job under Ray: one Ray actor per worker, on the worker's node.

ActorPool offers what tutti's elastic driver expects of its worker pool (start, stop,
stop_all and an `exits` queue of (worker id, returncode)), with actors instead of
processes. A thread per worker waits for its actor: it must start within the start
timeout, then runs the user's function once; its value, failure or death is recorded and
reported as an exit (0 for a value or a retirement, 1 otherwise).
"""

import collections
import queue
import threading
import traceback

from ._imports import ray_module
from .worker import TuttiRayWorker

# What the driver hands to start(): the worker's host (a Ray node address) and environment.
ActorSpec = collections.namedtuple("ActorSpec", ["host", "env"])

# How a worker ended: status "done" (rank, value), "retired", "failed" (summary, text), or
# "stopped" (by stop_all at the end of the job).
Outcome = collections.namedtuple("Outcome", ["status", "rank", "value", "summary", "text"])


class ActorPool:
    """Starts, watches and stops one actor per elastic worker.

    `call` is (fn, args, kwargs, with_executable), run once by each worker (see
    TuttiRayWorker.run_elastic); `resources` the Ray options of
    each actor (num_cpus, num_gpus); `start_timeout` bounds an actor's start (a node that
    cannot take it, a node that went away); `executable` (cls, args, kwargs) or None is
    created in every actor before the call; `interface` names the Gloo interface (None:
    the one that reaches `store_address`); `log_queue` the job's queue for ray_logger
    (None without callbacks), handed to the workers of every generation.
    """

    def __init__(self, call, resources, start_timeout, store_address, interface=None,
                 executable=None, log=None, log_queue=None):
        self.exits = queue.Queue()
        self.outcomes = {}   # worker id -> Outcome, once it ended
        self._call = call
        self._resources = dict(resources)
        self._start_timeout = start_timeout
        self._store_address = store_address
        self._interface = interface
        self._executable = executable
        self._log_queue = log_queue
        self._log = log or (lambda message: None)
        self._actors = {}    # worker id -> actor handle
        self._pids = {}      # worker id -> the actor's process id, once it started
        self._threads = []
        self._lock = threading.Lock()
        self._stopping = False
        self._remote_class = ray_module().remote(TuttiRayWorker)

    def start(self, worker_id, spec):
        """Asks Ray for an actor on node `spec.host` and starts watching it."""
        options = dict(self._resources)
        options["resources"] = {"node:%s" % spec.host: 0.001}
        actor = self._remote_class.options(max_restarts=0, **options).remote()
        with self._lock:
            self._actors[worker_id] = actor
        thread = threading.Thread(target=self._watch, args=(worker_id, actor, spec),
                                  name="tutti-ray-elastic-%d" % worker_id, daemon=True)
        self._threads.append(thread)
        thread.start()

    def stop(self, worker_ids):
        """Kills the workers' actors; their watchers then report the exits."""
        ray = ray_module()
        with self._lock:
            actors = [self._actors[w] for w in worker_ids if w in self._actors]
        for actor in actors:
            _kill(ray, actor)

    def stop_all(self):
        with self._lock:
            self._stopping = True
            everyone = list(self._actors)
        self.stop(everyone)
        for thread in self._threads:
            thread.join(timeout=10)

    @property
    def pids(self):
        """{worker id: process id} of every actor that started."""
        with self._lock:
            return dict(self._pids)

    def _watch(self, worker_id, actor, spec):
        outcome = self._outcome(worker_id, actor, spec)
        with self._lock:
            if outcome.status == "failed" and self._stopping:
                outcome = outcome._replace(status="stopped")
            self.outcomes[worker_id] = outcome
        if outcome.status == "failed":
            self._log("worker %d on %s: %s" % (worker_id, spec.host, outcome.summary))
        self.exits.put((worker_id, 1 if outcome.status == "failed" else 0))

    def _outcome(self, worker_id, actor, spec):
        ray = ray_module()
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        try:
            pid = ray.get(actor.setup.remote(spec.env, self._store_address, self._interface,
                                             self._executable),
                          timeout=self._start_timeout)
        except GetTimeoutError:
            _kill(ray, actor)
            return _failed("its Ray actor did not start within %g s (timeout_s); node %s "
                           "may lack the resources %s or be gone"
                           % (self._start_timeout, spec.host, self._resources))
        except (RayActorError, RayTaskError) as exc:
            return _failed("its Ray actor could not start: %s" % _first_line(exc))
        with self._lock:
            self._pids[worker_id] = pid
        try:
            status, rank, value = ray.get(actor.run_elastic.remote(*self._call,
                                                                 log_queue=self._log_queue))
        except RayTaskError as exc:
            # The actor lives on after a task raised: stop it, as a failed process would
            # end, so that peers blocked on it fail now rather than at the Gloo timeout.
            _kill(ray, actor)
            cause = exc.cause if isinstance(exc.cause, BaseException) else exc
            summary = "".join(traceback.format_exception_only(type(cause), cause)).strip()
            return _failed(summary, str(exc))
        except RayActorError as exc:
            return _failed("its Ray actor (pid %d) died: the process was killed or exited, "
                           "or its node went away (%s)" % (pid, _first_line(exc)))
        if status == "retired":
            _kill(ray, actor)
        # A worker that is done keeps its actor until stop_all(): its peers may still be
        # finishing the last collective with it.
        return Outcome(status, rank, value, None, None)


def _kill(ray, actor):
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # already gone
        pass


def _failed(summary, text=""):
    return Outcome("failed", None, None, summary, text)


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
