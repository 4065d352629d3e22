"""The Ray actor that hosts one tutti rank (one per slot, kept for the executor's life)."""

import os
import socket

from tutti.runner import environment, gang

from . import ray_logger


class TuttiRayWorker:
    """One rank: receives tuttirun's Gloo worker environment, then runs functions.

    Functions run in the actor's own process, so state (a model, hvd.init()) stays between
    run() calls, as with Horovod's RayExecutor.
    """

    def __init__(self):
        self.executable = None

    def where(self):
        """(node address, host name, process id) of this actor."""
        import ray

        return ray.util.get_node_ip_address(), socket.gethostname(), os.getpid()

    def setup(self, env, store_address, interface, executable=None):
        """Replaces any job variables in os.environ by this job's; starts the executable."""
        kept = environment.without_job_variables(os.environ)
        for name in set(os.environ) - set(kept):
            del os.environ[name]
        env = dict(env)
        env["TUTTI_GLOO_IFACE"] = interface or gang.interface_towards(store_address)
        os.environ.update(env)
        if executable is not None:
            cls, args, kwargs = executable
            self.executable = cls(*(args or ()), **(kwargs or {}))
        return os.getpid()

    # log_queue: the run's queue for ray_logger, or None when the run has no callbacks (set
    # on every call, so that a later run never logs to an earlier run's closed queue).

    def run(self, fn, args, kwargs, log_queue=None):
        ray_logger.configure(log_queue)
        return fn(*args, **kwargs)

    def execute(self, fn, log_queue=None):
        ray_logger.configure(log_queue)
        return fn(self.executable)

    def run_elastic(self, fn, args, kwargs, with_executable=False, log_queue=None):
        """An elastic worker's whole life: ("done", final rank, fn's value), or ("retired",
        None, None) when the job no longer needed this worker (tutti.common.elastic then
        raises SystemExit(0); caught here so that it does not end the actor's process).
        with_executable: fn(executable) instead (RayExecutor.execute)."""
        ray_logger.configure(log_queue)
        try:
            value = fn(self.executable) if with_executable else fn(*args, **kwargs)
        except SystemExit as exc:
            if exc.code in (None, 0):
                return "retired", None, None
            raise RuntimeError("the function called sys.exit(%r)" % (exc.code,)) from None
        return "done", int(os.environ.get("TUTTI_RANK", "-1")), value
