"""tutti.ray.RayExecutor: a tutti job whose ranks are Ray actors (Horovod's RayExecutor API).

start() reserves one placement-group bundle per worker (or per host), starts one actor per
slot, orders the ranks host by host and hands every actor the environment of a tuttirun
Gloo rank, pointing at a rendezvous store that this driver hosts (tutti.runner.gang). From
then on run()/execute() call functions on every rank and return the results in rank order.
A rank that raises or whose actor dies fails the call with tutti.runner.WorkerError naming
the rank; the other actors, blocked in collectives with the lost rank, are killed at once,
and the executor has to be start()ed again.

callbacks=[...] of run()/execute(): each callback is called, on the thread that called
run(), with every value that rank 0 logs through tutti.ray.ray_logger.log (see there).
"""

import dataclasses
import time
import traceback
from typing import Optional

from tutti.runner import gang
from tutti.runner.api import WorkerError

from . import _callbacks
from ._imports import ray_module
from .elastic import ElasticMode
from .worker import TuttiRayWorker


@dataclasses.dataclass(frozen=True)
class RaySettings:
    """What RayExecutor.create_settings returns.

    timeout_s bounds the start of the actors; placement_group_timeout_s the wait for the
    cluster to grant the resources; nics names the Gloo interface (one name). ssh_* are
    accepted for Horovod compatibility and unused: no ssh is involved under Ray.
    """

    timeout_s: float = 30
    ssh_identity_file: Optional[str] = None
    ssh_str: Optional[str] = None
    placement_group_timeout_s: float = 100
    nics: Optional[frozenset] = None


class RayExecutor:
    """Runs functions on `num_workers` tutti ranks hosted by Ray actors.

        settings = RayExecutor.create_settings(timeout_s=30)
        executor = RayExecutor(settings, num_workers=2, cpus_per_worker=1)
        executor.start()
        results = executor.run(train, args=(0.1,))   # one result per rank
        executor.shutdown()

    Either num_workers (spread as Ray places them, PACK strategy) or num_hosts with
    num_workers_per_host (one bundle per host, STRICT_SPREAD). use_gpu gives each worker
    gpus_per_worker GPUs (default 1). With min_workers (and max_workers, reset_limit,
    cooldown_range, elastic_timeout) the job is elastic instead: one worker per slot of
    Ray's nodes, re-formed when workers fail or nodes come and go (tutti.ray.elastic).
    """

    @classmethod
    def create_settings(cls, timeout_s=30, ssh_identity_file=None, ssh_str=None,
                        placement_group_timeout_s=100, nics=None):
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive, not %r" % (timeout_s,))
        if placement_group_timeout_s <= 0:
            raise ValueError("placement_group_timeout_s must be positive, not %r"
                             % (placement_group_timeout_s,))
        if nics is not None and len(set(nics)) != 1:
            raise ValueError("nics must name exactly one network interface, not %r" % (nics,))
        return RaySettings(timeout_s, ssh_identity_file, ssh_str, placement_group_timeout_s,
                           frozenset(nics) if nics is not None else None)

    def __init__(self, settings, num_workers=None, num_hosts=None, num_workers_per_host=1,
                 cpus_per_worker=1, use_gpu=False, gpus_per_worker=None,
                 use_current_placement_group=True, min_workers=None, max_workers=None,
                 reset_limit=None, cooldown_range=None, elastic_timeout=600,
                 override_discovery=True, cpus_per_slot=None, gpus_per_slot=None):
        ray_module()
        self._elastic = None
        if max_workers is not None and (not isinstance(min_workers, int) or min_workers < 1):
            raise ValueError("max_workers is given without a positive min_workers: an elastic "
                             "job needs min_workers")
        if min_workers is not None and (num_workers is not None or num_hosts is not None):
            raise ValueError("give either min_workers (elastic) or num_workers/num_hosts "
                             "(fixed size), not both")
        if not isinstance(settings, RaySettings):
            raise TypeError("settings must come from RayExecutor.create_settings(), not %r"
                            % (settings,))
        cpus_per_worker = cpus_per_slot if cpus_per_slot is not None else cpus_per_worker
        gpus_per_worker = gpus_per_slot if gpus_per_slot is not None else gpus_per_worker
        if min_workers is not None:
            self._elastic = ElasticMode(
                settings, min_workers, max_workers, reset_limit, cooldown_range,
                elastic_timeout, override_discovery, cpus_per_worker, use_gpu, gpus_per_worker)
            return
        if (num_workers is None) == (num_hosts is None):
            raise ValueError("give either num_workers or num_hosts (with num_workers_per_host)")
        for name, value in (("num_workers", num_workers), ("num_hosts", num_hosts),
                            ("num_workers_per_host", num_workers_per_host)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError("%s must be a positive integer, not %r" % (name, value))
        if cpus_per_worker is None or cpus_per_worker <= 0:
            raise ValueError("cpus_per_worker must be positive, not %r" % (cpus_per_worker,))
        if gpus_per_worker is not None and gpus_per_worker <= 0:
            raise ValueError("gpus_per_worker must be positive, not %r" % (gpus_per_worker,))
        self.settings = settings
        self.num_hosts = num_hosts
        self.num_workers_per_host = num_workers_per_host if num_hosts else 1
        self.num_workers = num_workers if num_workers is not None else (
            num_hosts * num_workers_per_host)
        self.cpus_per_worker = cpus_per_worker
        self.gpus_per_worker = (gpus_per_worker or 1) if use_gpu else 0
        self.use_gpu = use_gpu
        self.use_current_placement_group = use_current_placement_group
        self._workers = []       # actor handles in rank order
        self._pids = []          # their process ids, in rank order
        self._placement_group = None
        self._own_placement_group = False
        self._store = None
        self._failure = None

    # ---- lifecycle ----

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None,
              extra_env_vars=None):
        """Reserves the resources, starts one actor per rank and prepares each as a rank.

        executable_cls (optional) is instantiated on every worker with executable_args and
        executable_kwargs; execute(fn) calls fn(that object). extra_env_vars are set in
        every worker. TimeoutError when the cluster cannot grant the resources within
        placement_group_timeout_s or the actors do not start within timeout_s.
        """
        if self._elastic is not None:
            return self._elastic.start(executable_cls, executable_args, executable_kwargs,
                                       extra_env_vars)
        if self._workers:
            raise RuntimeError("the executor is already started; call shutdown() first")
        ray = ray_module()
        self._failure = None
        try:
            self._reserve(ray)
            actors = self._start_actors(ray)
            where = self._get(ray, [actor.where.remote() for actor in actors],
                              "the %d Ray actors to start" % len(actors))
            order = gang.rank_order([address for address, _, _ in where])
            self._workers = [actors[index] for index in order]
            hosts = [where[index][0] for index in order]
            driver = ray.util.get_node_ip_address()
            self._store = gang.DriverStore(gang.store_address(driver, hosts))
            interface = next(iter(self.settings.nics)) if self.settings.nics else None
            executable = ((executable_cls, executable_args, executable_kwargs)
                          if executable_cls is not None else None)
            setups = []
            for placement, actor in zip(gang.place(hosts), self._workers):
                env = self._store.endpoint.worker_environment(placement, interface,
                                                              extra_env_vars)
                setups.append(actor.setup.remote(env, self._store.address, interface,
                                                 executable))
            self._pids = self._gather(ray, setups)
        except BaseException:
            self._stop()
            raise

    def shutdown(self):
        """Kills the actors, releases the placement group and closes the store."""
        if self._elastic is not None:
            return self._elastic.shutdown()
        self._stop()

    # ---- running functions ----

    def run(self, fn, args=None, kwargs=None, callbacks=None):
        """fn(*args, **kwargs) on every rank; the results in rank order.

        callbacks: a list of callables, each called on this thread with every value that
        the function logs with tutti.ray.ray_logger.log (rank 0's unless it logs with
        chief_only=False), in order, while the ranks run and until they are done. A
        callback that raises stops the run: the workers are stopped (start() again to go
        on), then its exception propagates. Values still queued when a rank fails are
        dropped."""
        if self._elastic is not None:
            return self._elastic.run(fn, args, kwargs, callbacks)
        callbacks = _callbacks.checked(callbacks)
        self._check_running()
        args, kwargs = tuple(args or ()), dict(kwargs or {})
        return self._run_with(callbacks, lambda queue: [
            worker.run.remote(fn, args, kwargs, queue) for worker in self._workers])

    def run_remote(self, fn, args=None, kwargs=None):
        """Starts fn(*args, **kwargs) on every rank; the Ray object refs in rank order."""
        if self._elastic is not None:
            raise NotImplementedError("run_remote is not available in elastic mode: its "
                                      "workers come and go; use run()")
        self._check_running()
        return [worker.run.remote(fn, tuple(args or ()), dict(kwargs or {}))
                for worker in self._workers]

    def execute(self, fn, callbacks=None):
        """fn(executable) on every rank (executable: what start() made of executable_cls);
        callbacks as for run()."""
        if self._elastic is not None:
            return self._elastic.execute(fn, callbacks)
        callbacks = _callbacks.checked(callbacks)
        self._check_running()
        return self._run_with(callbacks, lambda queue: [
            worker.execute.remote(fn, queue) for worker in self._workers])

    def execute_single(self, fn):
        """fn(executable) on rank 0 alone."""
        if self._elastic is not None:
            raise NotImplementedError("execute_single is not available in elastic mode; use "
                                      "execute()")
        self._check_running()
        return self._gather(ray_module(), [self._workers[0].execute.remote(fn)])[0]

    @property
    def worker_pids(self):
        """The process id of every rank's actor, in rank order (empty in elastic mode,
        whose workers come and go)."""
        if self._elastic is not None:
            return []
        return list(self._pids)

    # ---- internals ----

    def _run_with(self, callbacks, start):
        """The results of the calls that start(queue) makes, with the callbacks fed from
        the run's queue meanwhile; the queue goes away with the run."""
        relay = _callbacks.Relay(callbacks)
        try:
            return self._gather(ray_module(), start(relay.queue), relay)
        finally:
            relay.close()

    def _check_running(self):
        if self._failure is not None:
            raise RuntimeError("the executor's workers were stopped after %s; call start() "
                               "again" % self._failure)
        if not self._workers:
            raise RuntimeError("the executor is not started; call start() first")

    def _reserve(self, ray):
        from ray.util.placement_group import get_current_placement_group, placement_group

        current = get_current_placement_group() if self.use_current_placement_group else None
        if current is not None:
            self._placement_group, self._own_placement_group = current, False
            return
        bundle = {"CPU": self.cpus_per_worker * self.num_workers_per_host}
        if self.gpus_per_worker:
            bundle["GPU"] = self.gpus_per_worker * self.num_workers_per_host
        count = self.num_hosts or self.num_workers
        strategy = "STRICT_SPREAD" if self.num_hosts else "PACK"
        self._placement_group = placement_group([dict(bundle) for _ in range(count)],
                                                strategy=strategy)
        self._own_placement_group = True
        timeout = self.settings.placement_group_timeout_s
        ready, _ = ray.wait([self._placement_group.ready()], timeout=timeout)
        if not ready:
            raise TimeoutError(
                "Ray could not place %d bundle(s) of %s (%s) within %g s; the cluster has "
                "%s available. Ask for fewer workers or resources, or raise "
                "placement_group_timeout_s" % (count, bundle, strategy, timeout,
                                               _resources(ray.available_resources())))

    def _start_actors(self, ray):
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        remote_class = ray.remote(TuttiRayWorker)
        actors = []
        for index in range(self.num_workers):
            strategy = PlacementGroupSchedulingStrategy(
                self._placement_group,
                placement_group_bundle_index=index // self.num_workers_per_host)
            actors.append(remote_class.options(
                num_cpus=self.cpus_per_worker, num_gpus=self.gpus_per_worker,
                max_restarts=0, max_task_retries=0,
                scheduling_strategy=strategy).remote())
        self._workers = actors  # so that _stop() finds them if start() fails from here
        return actors

    def _get(self, ray, refs, what):
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=self.settings.timeout_s)
        if len(ready) < len(refs):
            raise TimeoutError("%s took more than timeout_s=%g s"
                               % (what, self.settings.timeout_s))
        return ray.get(refs)

    def _gather(self, ray, refs, relay=None):
        """The refs' values in order. On a failure every actor is killed and WorkerError
        names the rank that failed: a rank's own failure wins over tutti's AbortedError on
        its peers (they only report the loss, often before Ray reports the dead actor).
        relay (callbacks): fed while waiting, and once more when every ref is done."""
        pending = {ref: rank for rank, ref in enumerate(refs)}
        values = [None] * len(refs)
        failures = {}  # rank -> (summary, traceback text, cause), in the order seen
        deadline = None
        while pending:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            if relay is not None and relay.queue is not None:
                # Wake up now and then to hand the logged values to the callbacks.
                timeout = _CALLBACK_POLL_S if timeout is None else min(timeout,
                                                                       _CALLBACK_POLL_S)
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=timeout)
            if not ready and relay is not None and relay.queue is not None and (
                    deadline is None or time.monotonic() < deadline):
                self._deliver(relay)
                continue
            if not ready:
                break  # the grace for the failing rank's own report is over
            for ref in ready:
                rank = pending.pop(ref)
                failure = self._outcome(ray, ref, rank, values)
                if failure is not None:
                    failures[rank] = failure
            if any(not gang.is_consequence(f[0]) for f in failures.values()):
                break
            if failures and deadline is None:
                deadline = time.monotonic() + gang.CONSEQUENCE_GRACE_S
        if not failures:
            if relay is not None:
                self._deliver(relay)  # what the ranks logged just before they returned
            return values
        causes = [rank for rank, f in failures.items() if not gang.is_consequence(f[0])]
        rank = causes[0] if causes else next(iter(failures))
        summary, text, cause = failures[rank]
        raise self._fail(rank, summary, text) from cause

    def _outcome(self, ray, ref, rank, values):
        """Stores a finished ref's value in `values`; (summary, text, cause) if it failed."""
        from ray.exceptions import RayActorError, RayTaskError

        try:
            values[rank] = ray.get(ref)
            return None
        except RayTaskError as exc:
            cause = exc.cause if isinstance(exc.cause, BaseException) else exc
            summary = "".join(traceback.format_exception_only(type(cause), cause)).strip()
            return summary, str(exc), cause
        except RayActorError as exc:
            pid = self._pids[rank] if rank < len(self._pids) else None
            summary = ("its Ray actor%s died: the process was killed or exited (%s)"
                       % (" (pid %d)" % pid if pid else "", _first_line(exc)))
            return summary, "", None

    def _deliver(self, relay):
        try:
            relay.deliver()
        except BaseException as exc:
            self._stop()
            self._failure = "a callback raised %s" % type(exc).__name__
            raise

    def _fail(self, rank, summary, text):
        self._stop()
        self._failure = "rank %d failed" % rank
        return WorkerError(rank, summary, text)

    def _stop(self):
        ray = ray_module()
        workers, self._workers = self._workers, []
        if ray.is_initialized():
            for worker in workers:
                try:
                    ray.kill(worker, no_restart=True)
                except Exception:  # already gone
                    pass
            if self._placement_group is not None and self._own_placement_group:
                from ray.util.placement_group import remove_placement_group

                try:
                    remove_placement_group(self._placement_group)
                except Exception:
                    pass
        self._placement_group = None
        if self._store is not None:
            self._store.close()
            self._store = None


# How often a run with callbacks looks for logged values while its ranks run.
_CALLBACK_POLL_S = 0.1


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _resources(available):
    shown = {name: value for name, value in available.items()
             if name in ("CPU", "GPU")}
    return ", ".join("%s=%g" % item for item in sorted(shown.items())) or "nothing"
