"""tutti.ray.ElasticRayExecutor: elastic training on Ray (Horovod's horovod.ray API).

    settings = ElasticRayExecutor.create_settings(min_num_proc=2, max_num_proc=4)
    executor = ElasticRayExecutor(settings, cpus_per_slot=1)
    executor.start()
    results = executor.run(train)     # train() uses hvd.elastic.run; one value per rank

Ray's node list is the host discovery (RayHostDiscovery): a node that joins the cluster
gets workers, up to max_num_proc; a worker whose actor dies or raises, or whose node leaves,
is replaced by re-forming the job from the committed state. RayExecutor(min_workers=...)
runs the same machinery (elastic_job.run).
"""

import dataclasses
import warnings
from typing import Any, Optional

from . import _callbacks
from ._imports import ray_module
from .discovery import RayHostDiscovery
from . import elastic_job


@dataclasses.dataclass
class ElasticRaySettings:
    """What ElasticRayExecutor.create_settings returns. `discovery` is set by the executor
    (RayHostDiscovery) unless it is created with override_discovery=False: then any object
    with find_available_hosts_and_slots() -> {host address: slots} can be put here."""

    min_num_proc: int = 1
    max_num_proc: Optional[int] = None
    reset_limit: Optional[int] = None
    elastic_timeout: float = 600
    timeout_s: float = 30
    ssh_identity_file: Optional[str] = None
    nics: Optional[frozenset] = None
    cooldown_range: Optional[tuple] = None
    verbose: int = 1
    discovery: Any = None

    @property
    def min_np(self):
        return self.min_num_proc

    @property
    def max_np(self):
        return self.max_num_proc


def check_limits(min_np, max_np, reset_limit, elastic_timeout, cooldown_range, names):
    """ValueError naming the argument (as the user spelled it, see `names`) that is wrong."""
    def positive_int(name, value):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError("%s must be a positive integer, not %r" % (names[name], value))

    positive_int("min_np", min_np)
    if max_np is not None:
        positive_int("max_np", max_np)
        if max_np < min_np:
            raise ValueError("%s %d is smaller than %s %d" % (names["max_np"], max_np,
                                                              names["min_np"], min_np))
    if reset_limit is not None and (isinstance(reset_limit, bool) or
                                    not isinstance(reset_limit, int) or reset_limit < 0):
        raise ValueError("reset_limit must be an integer of at least 0, not %r" % (reset_limit,))
    if not isinstance(elastic_timeout, (int, float)) or not elastic_timeout > 0:
        raise ValueError("elastic_timeout must be a positive number of seconds, not %r"
                         % (elastic_timeout,))
    if cooldown_range is not None:
        try:
            low, high = (int(v) for v in cooldown_range)
        except (TypeError, ValueError):
            raise ValueError("cooldown_range must be two whole numbers of seconds (low, high), "
                             "not %r" % (cooldown_range,)) from None
        if not 0 <= low <= high:
            raise ValueError("cooldown_range must be (low, high) with 0 <= low <= high, not %r"
                             % (cooldown_range,))


def check_nics(nics):
    if nics is not None and (isinstance(nics, str) or len(set(nics)) != 1):
        raise ValueError("nics must name exactly one network interface, e.g. {\"eth0\"}, not "
                         "%r" % (nics,))
    return frozenset(nics) if nics is not None else None


class ElasticRayExecutor:
    """Runs an elastic training function on Ray actors, one per slot of Ray's nodes.

    Horovod 0.28.1 deprecates it in favour of RayExecutor(min_workers=..., max_workers=...),
    which tutti.ray also offers; both run the same elastic job.
    """

    @staticmethod
    def create_settings(min_num_proc=1, max_num_proc=None, reset_limit=None,
                        elastic_timeout=600, timeout_s=30, ssh_identity_file=None, nics=None,
                        min_np=None, max_np=None, cooldown_range=None, verbose=1):
        """Settings for ElasticRayExecutor. min_np and max_np are Horovod's deprecated
        spellings of min_num_proc and max_num_proc (DeprecationWarning). timeout_s bounds
        the start of each worker's actor; ssh_identity_file is accepted and unused."""
        if min_np is not None:
            warnings.warn("min_np is deprecated, use min_num_proc instead", DeprecationWarning,
                          stacklevel=2)
            if min_num_proc not in (1, min_np):
                raise ValueError("give min_num_proc or min_np, not both (%r and %r)"
                                 % (min_num_proc, min_np))
            min_num_proc = min_np
        if max_np is not None:
            warnings.warn("max_np is deprecated, use max_num_proc instead", DeprecationWarning,
                          stacklevel=2)
            if max_num_proc not in (None, max_np):
                raise ValueError("give max_num_proc or max_np, not both (%r and %r)"
                                 % (max_num_proc, max_np))
            max_num_proc = max_np
        check_limits(min_num_proc, max_num_proc, reset_limit, elastic_timeout, cooldown_range,
                     {"min_np": "min_num_proc", "max_np": "max_num_proc"})
        if not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
            raise ValueError("timeout_s must be positive, not %r" % (timeout_s,))
        return ElasticRaySettings(min_num_proc, max_num_proc, reset_limit, elastic_timeout,
                                  timeout_s, ssh_identity_file, check_nics(nics),
                                  tuple(cooldown_range) if cooldown_range else None, verbose)

    def __init__(self, settings, use_gpu=False, cpus_per_slot=1, gpus_per_slot=None,
                 env_vars=None, override_discovery=True):
        ray_module()
        if not isinstance(settings, ElasticRaySettings):
            raise TypeError("settings must come from ElasticRayExecutor.create_settings(), "
                            "not %r" % (settings,))
        if gpus_per_slot and not use_gpu:
            raise ValueError("gpus_per_slot is set, but use_gpu is False: set use_gpu=True to "
                             "give the workers GPUs")
        gpus_per_slot = gpus_per_slot or int(bool(use_gpu))
        if use_gpu and gpus_per_slot < 1:
            raise ValueError("gpus_per_slot must be at least 1, not %r" % (gpus_per_slot,))
        if not isinstance(cpus_per_slot, (int, float)) or not cpus_per_slot > 0:
            raise ValueError("cpus_per_slot must be positive, not %r" % (cpus_per_slot,))
        if override_discovery:
            settings.discovery = RayHostDiscovery(use_gpu=use_gpu, cpus_per_slot=cpus_per_slot,
                                                  gpus_per_slot=gpus_per_slot or 1)
        elif not callable(getattr(settings.discovery, "find_available_hosts_and_slots", None)):
            raise ValueError("override_discovery=False needs settings.discovery with a "
                             "find_available_hosts_and_slots() method, not %r"
                             % (settings.discovery,))
        self.settings = settings
        self.use_gpu = use_gpu
        self.cpus_per_slot = cpus_per_slot
        self.gpus_per_slot = gpus_per_slot if use_gpu else 0
        self.env_vars = dict(env_vars or {})
        self._started = False

    def start(self):
        """Checks that Ray is connected; the workers start with each run()."""
        if not ray_module().is_initialized():
            raise RuntimeError("Ray is not initialized: call ray.init() (or ray.init(address="
                               "\"auto\") on a cluster) before ElasticRayExecutor.start()")
        self._started = True

    def run(self, worker_fn, callbacks=None):
        """worker_fn() on elastic workers until they finish; the return values of the
        workers of the last generation, in rank order. RuntimeError when the job stops.

        callbacks: a list of callables, each called on this thread with every value that
        the rank 0 worker (of any generation) logs with tutti.ray.ray_logger.log, in
        order. A callback that raises stops the job: its workers are stopped, then the
        exception propagates."""
        callbacks = _callbacks.checked(callbacks)
        if not self._started:
            raise RuntimeError("the executor is not started; call start() first")
        return elastic_job.run(self._job_settings(), (worker_fn, (), {}, False),
                               extra_env=self.env_vars, callbacks=callbacks)

    def shutdown(self):
        """Nothing stays between runs (each run's actors end with it); kept for symmetry
        with RayExecutor."""
        self._started = False

    def _job_settings(self):
        s = self.settings
        return elastic_job.ElasticJobSettings(
            discovery=s.discovery, min_np=s.min_num_proc, max_np=s.max_num_proc,
            reset_limit=s.reset_limit, elastic_timeout=s.elastic_timeout,
            cooldown_range=s.cooldown_range, start_timeout=s.timeout_s, nics=s.nics,
            cpus_per_slot=self.cpus_per_slot, gpus_per_slot=self.gpus_per_slot,
            verbose=s.verbose,
            names={"--min-np": "min_num_proc", "--max-np": "max_num_proc",
                   "--elastic-timeout": "elastic_timeout", "--reset-limit": "reset_limit"})


class ElasticMode:
    """RayExecutor(min_workers=...): Horovod 0.28.1's elastic RayExecutor, on the same
    elastic job as ElasticRayExecutor."""

    def __init__(self, settings, min_workers, max_workers, reset_limit, cooldown_range,
                 elastic_timeout, override_discovery, cpus_per_worker, use_gpu,
                 gpus_per_worker):
        check_limits(min_workers, max_workers, reset_limit, elastic_timeout, cooldown_range,
                     {"min_np": "min_workers", "max_np": "max_workers"})
        if not override_discovery:
            raise ValueError("override_discovery=False is not supported by RayExecutor: use "
                             "ElasticRayExecutor with settings.discovery for your own host "
                             "discovery")
        if not isinstance(cpus_per_worker, (int, float)) or not cpus_per_worker > 0:
            raise ValueError("cpus_per_worker must be positive, not %r" % (cpus_per_worker,))
        if gpus_per_worker is not None and not gpus_per_worker > 0:
            raise ValueError("gpus_per_worker must be positive, not %r" % (gpus_per_worker,))
        gpus = (gpus_per_worker or 1) if use_gpu else 0
        self._job = elastic_job.ElasticJobSettings(
            discovery=RayHostDiscovery(use_gpu=use_gpu, cpus_per_slot=cpus_per_worker,
                                       gpus_per_slot=gpus or 1),
            min_np=min_workers, max_np=max_workers, reset_limit=reset_limit,
            elastic_timeout=elastic_timeout,
            cooldown_range=tuple(cooldown_range) if cooldown_range else None,
            start_timeout=settings.timeout_s, nics=settings.nics,
            cpus_per_slot=cpus_per_worker, gpus_per_slot=gpus,
            names={"--min-np": "min_workers", "--max-np": "max_workers",
                   "--elastic-timeout": "elastic_timeout", "--reset-limit": "reset_limit"})
        self._executable = None
        self._extra_env = None
        self._started = False

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None,
              extra_env_vars=None):
        if not ray_module().is_initialized():
            raise RuntimeError("Ray is not initialized: call ray.init() (or ray.init(address="
                               "\"auto\") on a cluster) before RayExecutor.start()")
        self._executable = ((executable_cls, executable_args, executable_kwargs)
                            if executable_cls is not None else None)
        self._extra_env = dict(extra_env_vars or {})
        self._started = True

    def run(self, fn, args=None, kwargs=None, callbacks=None):
        return self._run((fn, tuple(args or ()), dict(kwargs or {}), False), callbacks)

    def execute(self, fn, callbacks=None):
        return self._run((fn, (), {}, True), callbacks)

    def shutdown(self):
        self._started = False

    def _run(self, call, callbacks):
        callbacks = _callbacks.checked(callbacks)
        if not self._started:
            raise RuntimeError("the executor is not started; call start() first")
        return elastic_job.run(self._job, call, self._executable, self._extra_env, callbacks)
