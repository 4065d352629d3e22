"""The elastic driver: decides each membership generation and publishes it in the store.

It owns the job's rendezvous store (the same authenticated store as a fixed Gloo job;
nothing else listens) and its worker processes. Events that re-form the job:
- a worker exits with a failure: its host is blacklisted (for good, or for a cool-down);
- a worker reports that its generation broke (elastic/reset/<id>);
- a worker of the previous generation fails to join the new one while the others did (it
  hangs): it is stopped, which is a failure as above;
- the discovery script lists new hosts (more workers, up to --max-np) or drops hosts (their
  workers are retired: they leave at their next commit and exit with status 0).
A new generation is published once the events settle and at least --min-np workers exist;
the job stops with a message after --reset-limit re-formations, or when fewer than
--min-np workers remain for longer than --elastic-timeout. The first worker to exit with
status 0 ends the job: no more re-formations, the others finish too.
"""

import json
import queue
import signal
import sys
import threading
import time

from .. import environment, gloo_job, hosts, network, tuning
from ..errors import UsageError
from ..output import OutputSink
from ..processes import ProcessGroup
from ..sessions import describe_exit
from .discovery import Blacklist, DiscoveryError, HostDiscovery

DISCOVERY_INTERVAL_SECONDS = 1.0
# Events that arrive together (a worker dies; its peers report their broken generation)
# re-form the job once: publish only after this long without a new event.
SETTLE_SECONDS = 0.3
# A worker of the previous generation that has not joined the new one this long after
# another one did is taken for hung (alive but not answering, e.g. stopped) and removed.
# Workers of one generation leave it together (an error or an agreed interrupt), so the
# healthy ones arrive within moments of each other.
STRAGGLER_SECONDS = 10.0
_TICK_SECONDS = 0.05
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _log(message):
    sys.stderr.write("tuttirun: %s\n" % message)
    sys.stderr.flush()


class _Worker:
    def __init__(self, worker_id, host):
        self.id = worker_id
        self.host = host
        self.alive = True
        self.retired = False


class ElasticDriver:
    def __init__(self, settings, store, secret, store_address, interface, pool, discovery,
                 initial_hosts, addresses, log=_log):
        self._settings = settings
        self._store = store
        self._secret = secret
        self._store_address = store_address
        self._interface = interface
        self._pool = pool
        self._discovery = discovery
        self._hosts = initial_hosts        # [Host] from the last successful discovery
        self._addresses = addresses        # host name -> resolved addresses
        self._blacklist = Blacklist(settings.blacklist_cooldown_range)
        self._log = log
        self._workers = {}
        self._next_id = 0
        self._generation = -1
        self._members = []
        self._previous_members = []
        self._old_arrived_at = None       # when a previous member first joined the newest
        self._resets = 0
        self._last_event = None            # time of the newest event not yet published
        self._short_since = None           # since when fewer than --min-np workers exist
        self._finished_code = None         # set when a worker succeeded
        self._finished_at = None
        self._signal = None
        self._core_env = tuning.environment(settings)

    # ---- limits ----
    def _min_np(self):
        return self._settings.min_np or self._settings.np or 1

    def _max_np(self):
        return self._settings.max_np or float("inf")

    # ---- the loop ----
    def run(self):
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for signum in _STOP_SIGNALS:
                previous[signum] = signal.signal(signum, self._on_signal)
        try:
            return self._run()
        finally:
            self._pool.stop_all()
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _on_signal(self, signum, frame):
        if self._signal is None:
            self._signal = signum

    def _run(self):
        self._reconcile()
        self._last_event = time.monotonic() - SETTLE_SECONDS
        next_discovery = time.monotonic() + DISCOVERY_INTERVAL_SECONDS
        while True:
            if self._signal is not None:
                self._log("received %s; stopping the job" % signal.Signals(self._signal).name)
                return 128 + self._signal
            self._poll()
            self._collect_exits()
            if self._finished_code is not None:
                if not self._running():
                    return self._finished_code
                if time.monotonic() - self._finished_at > self._settings.elastic_timeout:
                    self._log("workers still running %g s after the job finished; stopping them"
                              % self._settings.elastic_timeout)
                    return self._finished_code
                time.sleep(_TICK_SECONDS)
                continue
            now = time.monotonic()
            if now >= next_discovery:
                next_discovery = now + DISCOVERY_INTERVAL_SECONDS
                self._rediscover()
            for host in self._blacklist.returning():
                self._log("host %s is no longer blacklisted" % host)
                self._event()
            self._reconcile()
            self._check_reset_requests()
            self._check_stragglers()
            code = self._maybe_publish()
            if code is not None:
                return code
            time.sleep(_TICK_SECONDS)

    def _poll(self):
        """Called on every turn of the loop; a subclass's own work between turns (the Ray
        driver feeds its callbacks there). An exception ends run()."""

    def _event(self):
        self._last_event = time.monotonic()

    def _running(self):
        return [w for w in self._workers.values() if w.alive and not w.retired]

    def _collect_exits(self):
        while True:
            try:
                worker_id, returncode = self._pool.exits.get_nowait()
            except queue.Empty:
                return
            worker = self._workers[worker_id]
            worker.alive = False
            if worker.retired:
                continue
            if returncode == 0:
                if self._finished_code is None:
                    self._finished_code = 0
                    self._finished_at = time.monotonic()
                continue
            code, words = describe_exit(returncode)
            if self._finished_code is not None:
                self._log("worker %d on %s %s after the job finished" % (worker_id, worker.host,
                                                                          words))
                self._finished_code = code
                continue
            self._log("worker %d on %s %s" % (worker_id, worker.host, words))
            if not self._blacklist.excluded(worker.host):
                seconds = self._blacklist.add(worker.host)
                self._log("host %s is blacklisted %s" % (
                    worker.host, "for the rest of the job" if seconds is None
                    else "for %.1f s" % seconds))
            self._event()

    def _rediscover(self):
        try:
            found = self._discovery.find()
        except DiscoveryError as exc:
            self._log("%s; keeping the previous host list" % exc)
            return
        new = [h.name for h in found if h.name not in self._addresses]
        if new:
            try:
                self._addresses.update(hosts.resolve_all(new))
            except UsageError as exc:
                self._log("discovered host ignored: %s" % exc)
                found = [h for h in found if h.name in self._addresses]
        if found != self._hosts:
            self._hosts = found

    def _usable_hosts(self):
        return [h for h in self._hosts if not self._blacklist.excluded(h.name)]

    def _reconcile(self):
        """Retires workers on hosts no longer usable; starts workers on free slots (up to
        -np for the first generation, up to --max-np afterwards)."""
        limit = self._settings.np if self._generation < 0 else None
        usable = {h.name: h.slots for h in self._usable_hosts()}
        for worker in self._running():
            if worker.host not in usable:
                worker.retired = True
                self._store.set("elastic/retired/%d" % worker.id, b"1")
                self._log("worker %d on %s retired (host %s)" % (
                    worker.id, worker.host,
                    "blacklisted" if self._blacklist.excluded(worker.host) else "removed"))
                self._event()
        wanted = min(self._max_np(), limit or float("inf"))
        running = self._running()
        for host in self._usable_hosts():
            on_host = sum(1 for w in running if w.host == host.name)
            while on_host < host.slots and len(running) < wanted:
                worker = self._start_worker(host.name)
                if worker is None:
                    break
                running.append(worker)
                on_host += 1

    def _start_worker(self, host):
        worker_id = self._next_id
        self._next_id += 1
        spec, shown = self._launch(worker_id, host)
        if self._settings.verbose:
            self._log(shown)
        try:
            self._pool.start(worker_id, spec)
        except OSError as exc:
            self._log("cannot start a worker on %s: %s" % (host, exc.strerror or exc))
            return None
        worker = _Worker(worker_id, host)
        self._workers[worker_id] = worker
        self._event()
        return worker

    def worker_environment(self, worker_id, placement):
        """The job's variables for worker `worker_id`: the core's tuning, the Gloo store,
        and the elastic worker id and timeout (its rank comes from the store)."""
        env = dict(self._core_env)
        env.update(environment.gloo(placement, self._store_address, self._store.port,
                                    self._secret, self._interface))
        env["TUTTI_ELASTIC_WORKER_ID"] = str(worker_id)
        env["TUTTI_ELASTIC_TIMEOUT"] = repr(float(self._settings.elastic_timeout))
        return env

    def _launch(self, worker_id, host):
        """(what the pool starts, a line describing it) for worker `worker_id` on `host`.
        An engine that starts workers its own way (tutti.ray) overrides this."""
        local = hosts.is_local(host, self._addresses.get(host, ()))
        placement = hosts.Placement(worker_id, 1, host, 0, 1, 0, 1, local)
        launch = gloo_job.plan_ranks([placement], self._settings.command,
                                     lambda p: self.worker_environment(worker_id, p),
                                     self._settings)[0]
        return launch.spec, launch.shown.replace("rank %d" % worker_id,
                                                 "worker %d" % worker_id, 1)

    def _check_reset_requests(self):
        for worker_id in self._members:
            value = self._store.get("elastic/reset/%d" % worker_id)
            if value is not None and int(value) == self._generation:
                self._store.set("elastic/reset/%d" % worker_id, b"-1")
                self._event()

    def _check_stragglers(self):
        if self._generation < 1 or self._last_event is not None:
            return
        arrived = {m for m in self._members if self._store.get(
            "elastic/%d/arrived/%d" % (self._generation, m)) is not None}
        previous = set(self._previous_members)
        missing = [m for m in self._members if m in previous and m not in arrived
                   and self._workers[m].alive]
        if not missing or not (arrived & previous):
            return
        now = time.monotonic()
        if self._old_arrived_at is None:
            self._old_arrived_at = now
            return
        if now - self._old_arrived_at < STRAGGLER_SECONDS:
            return
        for worker_id in missing:
            self._log("worker %d on %s did not join generation %d within %g s of the others; "
                      "stopping it" % (worker_id, self._workers[worker_id].host,
                                       self._generation, STRAGGLER_SECONDS))
        self._pool.stop(missing)  # its exit is then handled as a failure
        self._old_arrived_at = None

    def _maybe_publish(self):
        """Publishes a new generation when something changed; an exit code to stop with."""
        if self._last_event is None or time.monotonic() - self._last_event < SETTLE_SECONDS:
            return None
        running = self._running()
        if len(running) < self._min_np():
            now = time.monotonic()
            if self._short_since is None:
                self._short_since = now
                self._log("%d worker(s) available, fewer than --min-np %d; waiting up to %g s "
                          "(--elastic-timeout) for more hosts" % (
                              len(running), self._min_np(), self._settings.elastic_timeout))
            elif now - self._short_since > self._settings.elastic_timeout:
                self._log("error: only %d worker(s) available, fewer than --min-np %d, for "
                          "%g s (--elastic-timeout); stopping the job" % (
                              len(running), self._min_np(), self._settings.elastic_timeout))
                return 1
            return None
        self._short_since = None
        if self._generation >= 0:
            self._resets += 1
            limit = self._settings.reset_limit
            if limit is not None and self._resets > limit:
                self._log("error: the job would be re-formed for the %d%s time, more than "
                          "--reset-limit %d allows; stopping the job" % (
                              self._resets, _suffix(self._resets), limit))
                return 1
        self._publish(running)
        return None

    def _publish(self, running):
        order = {h.name: i for i, h in enumerate(self._hosts)}
        running = sorted(running, key=lambda w: (order.get(w.host, len(order)), w.id))
        by_host = []
        for worker in running:
            if not by_host or by_host[-1][0] != worker.host:
                by_host.append((worker.host, []))
            by_host[-1][1].append(worker)
        generation = self._generation + 1
        rank = 0
        for cross_rank, (host, members) in enumerate(by_host):
            for local_rank, worker in enumerate(members):
                assignment = {"rank": rank, "size": len(running), "local_rank": local_rank,
                              "local_size": len(members), "cross_rank": cross_rank,
                              "cross_size": len(by_host), "host": host}
                self._store.set("elastic/%d/assign/%d" % (generation, worker.id),
                                json.dumps(assignment).encode())
                rank += 1
        self._previous_members = self._members
        self._old_arrived_at = None
        self._members = [w.id for w in running]
        self._store.set("elastic/%d/members" % generation, json.dumps(self._members).encode())
        self._store.set("elastic/generation", str(generation).encode())
        self._generation = generation
        self._last_event = None
        self._log("generation %d: %d worker(s) on %s" % (
            generation, len(running),
            ", ".join("%s:%d" % (host, len(members)) for host, members in by_host)))


def _suffix(number):
    if number % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")


def check_settings(settings):
    """UsageError for elastic settings that cannot work together."""
    if settings.mpi:
        raise UsageError("elastic training (--host-discovery-script) needs the Gloo "
                         "controller, not --mpi")
    if settings.hosts or settings.hostfile:
        raise UsageError("elastic training takes its hosts from --host-discovery-script; "
                         "do not also give -H/--hostfile")
    if not settings.command:
        raise UsageError("no command given; usage: tuttirun --host-discovery-script SCRIPT "
                         "[--min-np N] [--max-np N] COMMAND [ARGS...]")
    low, high = settings.min_np, settings.max_np
    if low is not None and high is not None and low > high:
        raise UsageError("--min-np %d is larger than --max-np %d" % (low, high))
    if settings.np is not None:
        if low is not None and settings.np < low:
            raise UsageError("-np %d is below --min-np %d" % (settings.np, low))
        if high is not None and settings.np > high:
            raise UsageError("-np %d is above --max-np %d" % (settings.np, high))


def run(settings, targets=None):
    """Runs an elastic job; returns the exit code. UsageError for bad settings."""
    check_settings(settings)
    discovery = HostDiscovery(settings.host_discovery_script, settings.slots_per_host)
    try:
        initial = discovery.find()
    except DiscoveryError as exc:
        raise UsageError(str(exc)) from None
    addresses = hosts.resolve_all([h.name for h in initial]) if initial else {}
    remote = [addresses[h.name][0] for h in initial
              if not hosts.is_local(h.name, addresses[h.name])]
    store_address, interface = network.choose(settings.network_interface, remote)
    secret = gloo_job.new_secret()
    store = gloo_job.start_store(store_address, secret)
    try:
        sink = OutputSink(targets or {"stdout": sys.stdout, "stderr": sys.stderr},
                          settings.output_filename)
        pool = ProcessGroup(sink, settings.stop_grace_seconds)
        try:
            pool.start_reaper()
        except OSError as exc:
            _log("cannot start the reaper (%s); stopping the job" % (exc.strerror or exc))
            return 127
        driver = ElasticDriver(settings, store, secret, store_address, interface, pool,
                               discovery, initial, addresses)
        return driver.run()
    finally:
        store.close()
