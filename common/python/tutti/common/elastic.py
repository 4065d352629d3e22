"""Elastic training, the framework-neutral part: membership generations and state objects.

An elastic job (tuttirun --min-np/--max-np/--host-discovery-script) is a sequence of
membership generations. tuttirun publishes each one in the job's rendezvous store:

    elastic/generation            the latest generation G
    elastic/<G>/members           JSON list of the worker ids of G, in rank order
    elastic/<G>/assign/<id>       JSON topology of worker <id> in G (rank, size, local_*, cross_*)
    elastic/<G>/arrived/<id>      written by each worker that is ready to connect in G
    elastic/retired/<id>          the worker is no longer wanted: it exits with status 0
    elastic/reset/<id>            written by a worker whose generation broke (value: G)

A worker learns its rank from the store at every init (`before_init`, called by
tutti.common.init), connects only once every member of G has arrived (so nobody waits in
the core for a peer that is still training), and connects under rendezvous keys of G
(TUTTI_ELASTIC_GENERATION). A failed collective ends G on every survivor (the core aborts
the generation); `run` then restores the last commit, re-initializes into the next
generation and syncs the state from the agreed root. Decisions every worker must share
(whether the hosts changed, which rank is the root) are made by a collective.
"""

import copy
import functools
import json
import os
import pickle
import sys
import time

import numpy

from . import basics
from .exceptions import HorovodInternalError, HostsUpdatedInterrupt

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


# ---- small collectives through the core (tutti.numpy): the same on every frontend ----

def _allreduce_ints(values, op, name):
    import tutti.numpy as tnp

    return tnp.allreduce(numpy.asarray(values, dtype=numpy.int64), op=op, name=name)


def broadcast_object(obj, root_rank, name):
    """`obj` of `root_rank`, pickled and broadcast; returned on every rank."""
    import tutti.numpy as tnp

    payload = pickle.dumps(obj) if basics.rank() == root_rank else b""
    length = tnp.broadcast(numpy.array([len(payload)], numpy.int64), root_rank,
                           name=name + ".length")
    buffer = numpy.frombuffer(payload, numpy.uint8).copy() if payload else \
        numpy.zeros(int(length[0]), numpy.uint8)
    data = tnp.broadcast(buffer, root_rank, name=name + ".data")
    return obj if basics.rank() == root_rank else pickle.loads(data.tobytes())


class State:
    """What an elastic training function keeps across failures and membership changes.

    commit() saves a copy and checks for host changes; restore() goes back to the last
    copy; sync() makes every worker hold the state of one agreed root. Subclasses
    implement save/restore/sync for their objects.
    """

    def __init__(self):
        self._reset_callbacks = []
        self._commits = 0  # commit() calls that this copy of the state has seen

    def register_reset_callbacks(self, callbacks):
        """Functions called (without arguments) after every re-formation of the job, e.g.
        to scale the learning rate to the new size."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state (restore() returns here) and raises HostsUpdatedInterrupt when
        the job's hosts changed. Call it at the same point on every worker."""
        self.save()
        self._commits += 1  # only once the copy exists: a save that fails counts nothing
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every worker when the launcher published a new
        generation. Workers may read the store at different moments, so the answer is
        agreed by a collective (MAX): all interrupt, or none."""
        member = membership()
        if member is None:
            return
        changed = 1 if member.hosts_changed() else 0
        agreed = _allreduce_ints([changed], basics.Max, "tutti.elastic.hosts_changed")
        if int(agreed[0]):
            raise HostsUpdatedInterrupt(skip_sync=False)

    def sync(self):
        """Makes every worker's state equal to the root's: the lowest rank among those
        holding the most commits (survivors of a failure rather than new workers)."""
        root = self._agree_root()
        self.sync_from(root)
        self._commits = broadcast_object(self._commits, root, "tutti.elastic.commits")
        self.save()

    def _agree_root(self):
        most = int(_allreduce_ints([self._commits], basics.Max, "tutti.elastic.commits_max")[0])
        mine = basics.rank() if self._commits == most else basics.size()
        return int(_allreduce_ints([mine], basics.Min, "tutti.elastic.root")[0])

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync_from(self, root_rank):
        raise NotImplementedError


class ObjectState(State):
    """State made of picklable Python attributes: `ObjectState(epoch=0, batch=0)` gives
    `state.epoch` and `state.batch`, saved by commit() and broadcast by sync()."""

    def __init__(self, bcast_object=None, get_rank=None, **kwargs):
        super().__init__()
        self._bcast_object = bcast_object
        self._saved = {}
        self._set_attrs(kwargs)
        self._tracked = list(kwargs)
        self.save()

    def _set_attrs(self, values):
        for name, value in values.items():
            setattr(self, name, value)

    def save(self):
        self._saved = {name: copy.deepcopy(getattr(self, name)) for name in self._tracked}

    def restore(self):
        self._set_attrs(copy.deepcopy(self._saved))

    def sync_from(self, root_rank):
        values = {name: getattr(self, name) for name in self._tracked}
        if self._bcast_object is not None:
            values = self._bcast_object(values, root_rank)
        else:
            values = broadcast_object(values, root_rank, "tutti.elastic.objects")
        self._set_attrs(values)


def run_fn(func, reset):
    """The body of every frontend's `hvd.elastic.run`: calls `func(state, ...)` until it
    returns, re-forming the job after a failed collective (restore the last commit) or a
    host change (keep the state), and syncing the state before each attempt."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if not basics.is_initialized():
            basics.init()
        while True:
            try:
                state.sync()  # a worker may die during the sync too
                return func(state, *args, **kwargs)
            except HorovodInternalError:
                if membership() is None:
                    raise  # not an elastic job: nothing would re-form it
                state.restore()
                membership().report_failure()
            except HostsUpdatedInterrupt:
                if membership() is None:
                    raise
            _rejoin(reset)
            state.on_reset()

    return wrapper


def _rejoin(reset):
    """Calls `reset` until this worker is in a working generation. A generation can break
    while its members connect (a member died, or a newer one was published meanwhile):
    then the next one is tried. Joining gives up (RuntimeError) after the elastic timeout."""
    while True:
        try:
            reset()
            return
        except HorovodInternalError:
            membership().report_failure()


def reset():
    """Leaves the broken or outdated generation and joins the next one."""
    if basics.is_initialized():
        basics.shutdown()
    basics.init()
