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
import pickle

from . import basics, lifecycle
from .exceptions import HorovodInternalError, HostsUpdatedInterrupt
from .membership import (  # noqa: F401  (the membership names, as before)
    DEFAULT_TIMEOUT_SECONDS,
    GENERATION_VARIABLE,
    TIMEOUT_VARIABLE,
    WORKER_ID_VARIABLE,
    before_init,
    enabled,
    membership,
)


# ---- small collectives through the core: the same on every frontend ----

def broadcast_object(obj, root_rank, name):
    """`obj` of `root_rank`, pickled and broadcast; returned on every rank."""
    payload = pickle.dumps(obj) if basics.rank() == root_rank else b""
    data = lifecycle.broadcast_bytes(payload, root_rank, name)
    return obj if basics.rank() == root_rank else pickle.loads(data)


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
        agreed = lifecycle.allreduce_ints([changed], basics.Max,
                                          "tutti.elastic.hosts_changed")
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
        most = int(lifecycle.allreduce_ints([self._commits], basics.Max,
                                            "tutti.elastic.commits_max")[0])
        mine = basics.rank() if self._commits == most else basics.size()
        return int(lifecycle.allreduce_ints([mine], basics.Min, "tutti.elastic.root")[0])

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
            lifecycle.init()
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
    lifecycle.init()
