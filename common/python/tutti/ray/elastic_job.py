"""One elastic job on Ray: tutti's elastic driver with Ray's nodes as hosts and actors as
workers.

The driver (tutti.runner.elastic.driver, the one behind `tuttirun --host-discovery-script`)
polls the host discovery once a second, decides every membership generation and publishes
it in the job's authenticated store, which this process hosts; nothing else listens. A
failed or killed actor blacklists its node and re-forms the job; a node that joins gets
workers at the next re-formation, one that leaves loses them. The workers train with
`hvd.elastic.run` as under tuttirun.
"""

import dataclasses
import sys
import types
from typing import Any, Optional

from tutti.runner import gang, gloo_job, hosts
from tutti.runner.elastic.discovery import DiscoveryError
from tutti.runner.elastic.driver import ElasticDriver

from . import _callbacks
from ._imports import ray_module
from .actor_pool import ActorPool, ActorSpec


@dataclasses.dataclass
class ElasticJobSettings:
    """Everything one elastic Ray job needs (checked by the executors that build it)."""

    discovery: Any                  # has find_available_hosts_and_slots() -> {host: slots}
    min_np: int = 1
    max_np: Optional[int] = None
    reset_limit: Optional[int] = None
    elastic_timeout: float = 600
    cooldown_range: Optional[tuple] = None
    start_timeout: float = 30
    nics: Optional[frozenset] = None
    cpus_per_slot: float = 1
    gpus_per_slot: float = 0
    verbose: int = 1
    # How the user spelled the limits, for messages ({"--min-np": "min_workers", ...}).
    names: dict = dataclasses.field(default_factory=dict)


class _Discovery:
    """A Ray host discovery (find_available_hosts_and_slots) as the driver's discovery."""

    def __init__(self, source):
        self._source = source

    def find(self):
        try:
            found = self._source.find_available_hosts_and_slots()
        except Exception as exc:
            raise DiscoveryError("Ray host discovery failed: %s: %s"
                                 % (type(exc).__name__, exc)) from None
        return [hosts.Host(str(name), int(slots))
                for name, slots in sorted(found.items()) if int(slots) > 0]


class _RayDriver(ElasticDriver):
    """The elastic driver, starting each worker as an actor (ActorSpec) on its node."""

    def __init__(self, *args, extra_env=None, relay=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._extra_env = {name: str(value) for name, value in (extra_env or {}).items()}
        self._relay = relay

    def _poll(self):
        # The callbacks run here, on the thread that called run(); one that raises ends
        # the loop, and run() stops the workers on the way out.
        if self._relay is not None:
            self._relay.deliver()

    def _launch(self, worker_id, host):
        placement = hosts.Placement(worker_id, 1, host, 0, 1, 0, 1, False)
        env = dict(self._extra_env)
        env.update(self.worker_environment(worker_id, placement))
        return ActorSpec(host, env), "worker %d: a Ray actor on node %s" % (worker_id, host)


class _Log:
    """Prints the driver's messages (with the user's names for the limits) and keeps them."""

    def __init__(self, names, verbose):
        self._names = names
        self._verbose = verbose
        self.messages = []

    def __call__(self, message):
        for flag, name in self._names.items():
            message = message.replace(flag, name)
        self.messages.append(message)
        if self._verbose:
            sys.stderr.write("tutti.ray: %s\n" % message)
            sys.stderr.flush()


def run(settings, call, executable=None, extra_env=None, callbacks=None):
    """Runs `call` = (fn, args, kwargs, with_executable) on elastic workers until they
    finish; the values of the workers of the last generation in rank order. RuntimeError
    when the job stops (fewer than min_np workers for longer than elastic_timeout, too many
    resets). `callbacks` (checked by the caller) get what the workers log with ray_logger;
    an exception of theirs propagates once the workers are stopped."""
    ray = ray_module()
    if not ray.is_initialized():
        raise RuntimeError("Ray is not initialized: call ray.init() (or ray.init(address="
                           "\"auto\") on a cluster) before running an elastic job")
    log = _Log(settings.names, settings.verbose)
    discovery = _Discovery(settings.discovery)
    try:
        initial = discovery.find()
    except DiscoveryError as exc:
        raise RuntimeError(str(exc)) from None
    addresses = hosts.resolve_all([h.name for h in initial]) if initial else {}
    nodes = [n["NodeManagerAddress"] for n in ray.nodes() if n.get("Alive")]
    store_address = gang.store_address(ray.util.get_node_ip_address(), nodes)
    interface = next(iter(settings.nics)) if settings.nics else None
    secret = gloo_job.new_secret()
    store = gloo_job.start_store(store_address, secret)
    resources = {"num_cpus": settings.cpus_per_slot, "num_gpus": settings.gpus_per_slot}
    driver_settings = types.SimpleNamespace(
        np=None, min_np=settings.min_np, max_np=settings.max_np,
        elastic_timeout=settings.elastic_timeout, reset_limit=settings.reset_limit,
        blacklist_cooldown_range=settings.cooldown_range, verbose=settings.verbose > 1,
        command=None)
    relay = pool = None
    try:
        relay = _callbacks.Relay(callbacks)
        pool = ActorPool(call, resources, settings.start_timeout, store_address, interface,
                         executable, log, relay.queue)
        driver = _RayDriver(driver_settings, store, secret, store_address, interface, pool,
                            discovery, initial, addresses, log=log, extra_env=extra_env,
                            relay=relay)
        code = driver.run()
        if code == 0:
            relay.deliver()  # what the workers logged just before they returned
    finally:
        if pool is not None:
            pool.stop_all()
        store.close()
        if relay is not None:
            relay.close()
    outcomes = dict(pool.outcomes)
    if code != 0:
        raise RuntimeError("the elastic Ray job failed: %s" % _reason(code, log, outcomes))
    done = sorted((o for o in outcomes.values() if o.status == "done"), key=lambda o: o.rank)
    return [o.value for o in done]


def _reason(code, log, outcomes):
    """Why the job stopped: the driver's error, with the last worker failure (often the
    cause: a function that raises on every worker blacklists every node)."""
    errors = [m[len("error: "):] for m in log.messages if m.startswith("error: ")]
    if code > 128 and not errors:
        errors = ["stopped by signal %d" % (code - 128)]
    failed = [(worker, o) for worker, o in sorted(outcomes.items()) if o.status == "failed"]
    if failed:
        worker, outcome = failed[-1]
        errors.append("%sworker %d failed: %s%s" % (
            "the last " if errors else "", worker, outcome.summary,
            "\n\n" + outcome.text if outcome.text else ""))
    return "; ".join(errors) or "the driver stopped with code %d" % code
