"""This worker's place in an elastic job: the generations tuttirun publishes in the store.

A worker learns its rank from the store at every init (before_init, called by
tutti.common.init), connects only once every member of the generation has arrived, and
connects under rendezvous keys of that generation (TUTTI_ELASTIC_GENERATION). The store's
keys are described in tutti.common.elastic.
"""

import json
import os
import sys
import time

WORKER_ID_VARIABLE = "TUTTI_ELASTIC_WORKER_ID"
TIMEOUT_VARIABLE = "TUTTI_ELASTIC_TIMEOUT"
GENERATION_VARIABLE = "TUTTI_ELASTIC_GENERATION"
DEFAULT_TIMEOUT_SECONDS = 600.0
# A worker waits this much longer than the launcher's --elastic-timeout for a generation,
# so that the launcher, which sees the whole job, decides first (it stops the job with its
# own message when fewer than --min-np workers remain); the worker gives up alone only
# when no launcher does anything.
LAUNCHER_MARGIN_SECONDS = 30.0
_POLL_SECONDS = 0.02
_TOPOLOGY = ("RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE")


def enabled():
    """True in a worker started by tuttirun's elastic mode."""
    return bool(os.environ.get(WORKER_ID_VARIABLE))


class _Membership:
    """This worker's view of the store: which generation it is in, and the next one."""

    def __init__(self):
        from tutti.runner.store_client import StoreClient

        self.worker_id = os.environ[WORKER_ID_VARIABLE]
        self.timeout = float(os.environ.get(TIMEOUT_VARIABLE, DEFAULT_TIMEOUT_SECONDS))
        self.store = StoreClient.from_environment(os.environ)
        self.generation = -1  # the generation this worker last joined

    def _get(self, key):
        return self.store.get(key)

    def latest(self):
        value = self._get("elastic/generation")
        return -1 if value is None else int(value)

    def join_next(self):
        """Blocks until a generation newer than the last one joined has every member
        arrived; sets the TUTTI_* topology of this worker in it. Exits with status 0 when
        the launcher retired this worker."""
        deadline = time.monotonic() + self.timeout + LAUNCHER_MARGIN_SECONDS
        target = self.generation + 1
        announced = None
        while True:
            if self._get("elastic/retired/" + self.worker_id) is not None:
                sys.stderr.write("tutti elastic: worker %s is no longer needed; exiting\n"
                                 % self.worker_id)
                sys.stderr.flush()
                raise SystemExit(0)
            latest = self.latest()
            if latest >= target:
                assignment = self._get("elastic/%d/assign/%s" % (latest, self.worker_id))
                if assignment is not None:
                    if announced != latest:
                        self.store.set("elastic/%d/arrived/%s" % (latest, self.worker_id), b"1")
                        announced = latest
                    members = json.loads(self._get("elastic/%d/members" % latest))
                    if all(self._get("elastic/%d/arrived/%s" % (latest, m)) is not None
                           for m in members):
                        self._adopt(latest, json.loads(assignment))
                        return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    "elastic worker %s: no complete membership generation after %g s "
                    "(TUTTI_ELASTIC_TIMEOUT plus %g s); the launcher may have stopped the job"
                    % (self.worker_id, self.timeout, LAUNCHER_MARGIN_SECONDS))
            time.sleep(_POLL_SECONDS)

    def _adopt(self, generation, assignment):
        self.generation = generation
        os.environ[GENERATION_VARIABLE] = str(generation)
        for name in _TOPOLOGY:
            value = str(assignment[name.lower()])
            os.environ["TUTTI_" + name] = value
            os.environ["HOROVOD_" + name] = value

    def report_failure(self):
        """Tells the launcher that this worker's generation broke (it re-forms the job)."""
        try:
            self.store.set("elastic/reset/" + self.worker_id, str(self.generation).encode())
        except Exception:  # the launcher is gone: the next join will time out and say so
            pass

    def hosts_changed(self):
        """Whether the launcher published a newer generation (read locally; see commit)."""
        return self.latest() > self.generation


_membership = None


def membership():
    """This process's _Membership (created on first use); None outside an elastic job."""
    global _membership
    if _membership is None and enabled():
        _membership = _Membership()
    return _membership


def before_init():
    """Called by tutti.common.init before the core starts: joins the next generation."""
    if membership() is not None:
        membership().join_next()
