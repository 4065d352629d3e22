"""Process sets: subsets of the job's ranks that run collectives among themselves.

    evens = ProcessSet([0, 2])
    init(process_sets=[evens])          # static: registered by init itself
    odds = add_process_set([1, 3])      # dynamic: registered at run time
    allreduce(x, process_set=odds)      # only ranks 1 and 3 take part
    remove_process_set(odds)

Registering and removing a set are collective over the whole job: every rank makes the same
calls in the same order, including ranks that are not in the set. A registration lasts until
shutdown(); after init() again, sets must be registered again (their process_set_id reads
None in between).
"""

import ctypes
import numbers
import sys

from . import basics, core
from .exceptions import InvalidArgumentError


class ProcessSet:
    """A set of global ranks. Create it with the ranks (or, as in Horovod, an mpi4py
    communicator: its processes' ranks in MPI_COMM_WORLD), then register it with
    add_process_set() or init(process_sets=[...]) before using it."""

    def __init__(self, ranks):
        if _is_mpi_comm(ranks):
            ranks = comm_ranks(ranks)
        self._ranks = _normalized_ranks(ranks)
        self._id = None
        self._session = None  # basics.session() at registration

    @property
    def ranks(self):
        """The set's global ranks, ascending."""
        return list(self._ranks)

    @property
    def process_set_id(self):
        """The id the core knows this set by, or None when it is not registered in the
        running session."""
        if self._id is None or self._session != basics.session() or not basics.is_initialized():
            return None
        return self._id

    def rank(self):
        """This process's rank within the set; None while the set is not registered (as
        in Horovod); InvalidArgumentError (a ValueError) if this process is not a member."""
        if self.process_set_id is None:
            return None
        return set_rank(self._registered_id())

    def size(self):
        """Number of ranks in the set; None while it is not registered (as in Horovod)."""
        if self.process_set_id is None:
            return None
        return set_size(self._registered_id())

    def included(self):
        """True if this process is a member of the set, registered or not (as in Horovod)."""
        return basics.rank() in self._ranks

    def __repr__(self):
        set_id = self.process_set_id
        state = "id %d" % set_id if set_id is not None else "not registered"
        return "ProcessSet(ranks=%s, %s)" % (self._ranks, state)

    def _registered_id(self):
        basics.rank()  # raises NotInitializedError, with the core's reason, when not running
        set_id = self.process_set_id
        if set_id is None:
            if self._session is not None and self._session != basics.session():
                raise InvalidArgumentError(
                    "ProcessSet(ranks=%s) was registered before tutti was shut down; "
                    "register it again with add_process_set() or init(process_sets=...)"
                    % self._ranks
                )
            raise InvalidArgumentError(
                "ProcessSet(ranks=%s) is not registered; register it with add_process_set() "
                "or init(process_sets=...) first" % self._ranks
            )
        return set_id

    def _mark_registered(self, set_id):
        self._id = set_id
        self._session = basics.session()


class _GlobalProcessSet(ProcessSet):
    """The set of every rank of the job; always registered while tutti is initialized."""

    def __init__(self):
        self._ranks = []
        self._id = core.GLOBAL_PROCESS_SET
        self._session = None

    @property
    def ranks(self):
        return list(range(basics.size())) if basics.is_initialized() else []

    @property
    def process_set_id(self):
        return core.GLOBAL_PROCESS_SET

    def rank(self):
        return basics.rank()

    def size(self):
        return basics.size()

    def included(self):
        basics.rank()  # raises NotInitializedError before init
        return True

    def __repr__(self):
        return "global_process_set"

    def _registered_id(self):
        basics.rank()  # raises NotInitializedError before init
        return core.GLOBAL_PROCESS_SET


global_process_set = _GlobalProcessSet()

# Sets registered in the running session, by id.
_registered = {}


def _describe(set_id):
    if set_id in _registered:
        return repr(_registered[set_id])
    return "process set %d" % set_id


def set_size(set_id):
    """Number of ranks in the process set with id `set_id` (a registered id, as in a
    request). InvalidArgumentError when the core does not know the id. The one place the
    frontends ask the core for it."""
    if set_id == core.GLOBAL_PROCESS_SET:
        return basics.size()
    value = core.lib.tutti_process_set_size(set_id)
    if value < 0:
        basics.rank()  # NotInitializedError, with the core's reason, when not running
        raise InvalidArgumentError(
            "%s is not known to the core: %s" % (_describe(set_id), core.last_error()))
    return value


def set_rank(set_id):
    """This process's rank within the process set with id `set_id`. InvalidArgumentError
    when this process is not a member (or the id is unknown)."""
    if set_id == core.GLOBAL_PROCESS_SET:
        return basics.rank()
    value = core.lib.tutti_process_set_rank(set_id)
    if value < 0:
        set_size(set_id)  # an unknown id fails there, with the core's reason
        raise InvalidArgumentError(
            "rank %d is not in %s; check included() before asking for rank()"
            % (basics.rank(), _describe(set_id)))
    return value


def even_splits(rows, parts):
    """Horovod's split of `rows` rows over `parts` ranks when an alltoall names no splits:
    as even as possible, the first rows % parts ranks one row more."""
    base, extra = divmod(rows, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def reducescatter_rows(rows, set_rank, set_size):
    """The rows of a reducescatter result on rank `set_rank` of a set of `set_size` ranks,
    for an input of `rows` rows: the core's rule, which is even_splits'."""
    base, extra = divmod(rows, set_size)
    return base + (1 if set_rank < extra else 0)


def _is_mpi_comm(value):
    comm_class = getattr(sys.modules.get("mpi4py.MPI"), "Comm", None)
    return comm_class is not None and isinstance(value, comm_class)


def comm_ranks(comm):
    """The global ranks of the processes of `comm`: an mpi4py communicator (their ranks in
    MPI_COMM_WORLD, which are tutti's ranks under mpirun) or a list of ranks."""
    if not _is_mpi_comm(comm):
        if isinstance(comm, (list, tuple, range)):
            return _normalized_ranks(comm)
        raise InvalidArgumentError(
            "comm must be an mpi4py communicator or a list of ranks, got %s"
            % type(comm).__name__)
    from mpi4py import MPI

    if comm == MPI.COMM_NULL:
        raise InvalidArgumentError("comm is MPI.COMM_NULL: this process is not in it")
    world = MPI.COMM_WORLD.Get_group()
    group = comm.Get_group()
    try:
        ranks = MPI.Group.Translate_ranks(group, list(range(group.Get_size())), world)
    finally:
        group.Free()
        world.Free()
    return sorted(int(r) for r in ranks)


def _normalized_ranks(ranks):
    if isinstance(ranks, ProcessSet):
        return ranks.ranks
    try:
        values = list(ranks)
    except TypeError:
        raise InvalidArgumentError(
            "a process set needs a list of ranks, got %r" % (ranks,)
        ) from None
    for value in values:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise InvalidArgumentError(
                "process set ranks must be non-negative integers, got %r in %r"
                % (value, values)
            )
    normalized = sorted(int(v) for v in values)
    if not normalized:
        raise InvalidArgumentError("a process set needs at least one rank")
    duplicates = sorted({v for v in normalized if normalized.count(v) > 1})
    if duplicates:
        raise InvalidArgumentError(
            "process set ranks must be distinct; %s appear more than once in %r"
            % (duplicates, values)
        )
    return normalized


def _forget_stale():
    # Drop registrations of earlier sessions.
    for set_id in [i for i, s in _registered.items() if s.process_set_id is None]:
        del _registered[set_id]


def add_process_set(process_set):
    """Registers a process set at run time; collective over every rank of the job (all
    call it with the same ranks, in the same order). Accepts a ProcessSet or a list of
    ranks; returns the registered ProcessSet."""
    if process_set is global_process_set:
        raise InvalidArgumentError("global_process_set is always registered")
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    size = basics.size()  # raises NotInitializedError before init
    _forget_stale()
    if process_set.process_set_id is not None:
        raise InvalidArgumentError("%r is already registered" % process_set)
    outside = [r for r in process_set.ranks if r >= size]
    if outside:
        raise InvalidArgumentError(
            "process set ranks %s are outside the job: ranks go from 0 to %d"
            % (outside, size - 1)
        )
    for other in _registered.values():
        if other.ranks == process_set.ranks:
            raise InvalidArgumentError(
                "a process set with ranks %s is already registered (id %d)"
                % (other.ranks, other.process_set_id)
            )
    ranks = (ctypes.c_int32 * len(process_set.ranks))(*process_set.ranks)
    set_id = ctypes.c_int32(-1)
    core.check(core.lib.tutti_add_process_set(ranks, len(process_set.ranks),
                                              ctypes.byref(set_id)))
    process_set._mark_registered(set_id.value)
    _registered[set_id.value] = process_set
    return process_set


def remove_process_set(process_set):
    """Unregisters a process set; collective over every rank of the job, like
    add_process_set(). Returns True, or False (as Horovod does) for the global set and for
    a set that is not registered; those calls do nothing."""
    if not isinstance(process_set, ProcessSet):
        raise InvalidArgumentError(
            "remove_process_set() needs a ProcessSet, got %s" % type(process_set).__name__
        )
    if process_set is global_process_set or process_set.process_set_id is None:
        return False
    set_id = process_set._registered_id()
    core.check(core.lib.tutti_remove_process_set(set_id))
    _registered.pop(set_id, None)
    process_set._id = None
    process_set._session = None
    return True


def request_id(process_set):
    """The id to put in a request for `process_set`, after checking that it is registered
    and that this rank is a member. Used by every frontend (tutti.numpy and the plugins)."""
    if process_set is None or process_set is global_process_set:
        return core.GLOBAL_PROCESS_SET
    if not isinstance(process_set, ProcessSet):
        raise InvalidArgumentError(
            "process_set must be a ProcessSet, got %s" % type(process_set).__name__
        )
    set_id = process_set._registered_id()
    if core.lib.tutti_process_set_rank(set_id) < 0:
        raise InvalidArgumentError(
            "rank %d is not in %r: only its members may run collectives on it"
            % (basics.rank(), process_set)
        )
    return set_id


def normalized_list(process_sets):
    """The argument of init(process_sets=...) as a list of ProcessSets (None: empty)."""
    if process_sets is None:
        return []
    if not isinstance(process_sets, (list, tuple)):
        raise InvalidArgumentError(
            "process_sets must be a list of ProcessSets or rank lists, got %r" % (process_sets,)
        )
    return [s if isinstance(s, ProcessSet) else ProcessSet(s) for s in process_sets]


def register_static(wanted):
    """Registers the ProcessSets given to init(), in order, skipping those already
    registered in this session. Returns them."""
    registered = []
    for process_set in wanted:
        if process_set is global_process_set or process_set.process_set_id is not None:
            registered.append(process_set)
            continue
        registered.append(add_process_set(process_set))
    return registered
