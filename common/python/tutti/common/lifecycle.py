"""init(): starting tutti in a process, with the steps around the core's own start
(an elastic worker's place in the job, the process sets given to init, the job's shape).

It sits above basics, process_sets, membership and the request layer, so that none of
them needs to import anything above itself.
"""

import numpy

from . import basics, core, membership, requests
from . import process_sets as _sets
from .control import synchronize
from .exceptions import InvalidArgumentError, UnsupportedError


def init(comm=None, process_sets=None):
    """Starts tutti in this process: reads the TUTTI_* environment, connects to the other
    ranks (MPI under mpirun, Gloo under tuttirun, alone otherwise) and starts the core's
    background thread.

    comm: as in Horovod, an mpi4py communicator or a list of global ranks that the job
    runs on. tutti runs on every process of the launch, so it must cover all of them (a
    smaller group: register a ProcessSet instead); None means all.
    process_sets: ProcessSets (lists of global ranks or mpi4py communicators) to register
    right after the core starts, the same on every rank; they stay registered until
    shutdown(). "dynamic" (Horovod's switch for add_process_set at run time) registers
    none: in tutti sets can always be added at run time. Calling init() again while
    initialized only registers the given sets that are not registered yet.
    Returns the registered ProcessSets, in the order given. A failure raises the core's
    error; an init() that started the core and then failed to register a set shuts the
    core down again.
    """
    if isinstance(process_sets, str):
        if process_sets != "dynamic":
            raise InvalidArgumentError(
                'process_sets must be a list of ProcessSets or "dynamic", got %r' % process_sets)
        process_sets = None
    wanted = _sets.normalized_list(process_sets)  # bad arguments fail before connecting
    comm_ranks = _sets.comm_ranks(comm) if comm is not None else None
    started = not basics.is_initialized()
    if started:
        membership.before_init()  # an elastic worker first learns its rank in the next generation
        basics.start_session()
    try:
        if comm_ranks is not None and comm_ranks != list(range(basics.size())):
            raise UnsupportedError(
                "init(comm=...) got a communicator of ranks %s, but this job has %d processes: "
                "tutti runs on every process it was launched with. Launch only the processes "
                "that should train, or pass comm=None and run collectives on "
                "ProcessSet(comm) (add_process_set) instead" % (comm_ranks, basics.size()))
        if started:
            _learn_homogeneity()
        return _sets.register_static(wanted)
    except Exception:
        if started:
            core.lib.tutti_shutdown()
        raise


# Whether every host runs the same number of ranks; learned by init() (collective).
_homogeneous = None


def _learn_homogeneity():
    global _homogeneous
    # One MAX allreduce of (local size, -local size) gives the largest and the smallest.
    local = basics.local_size()
    largest, negated_smallest = allreduce_ints([local, -local], basics.Max,
                                               "tutti.init.local_sizes")
    _homogeneous = bool(largest == -negated_smallest)


def is_homogeneous():
    """True if every host of the job runs the same number of ranks (Horovod's
    is_homogeneous); decided once by init() and the same on every rank."""
    basics.rank()  # raises NotInitializedError before init()
    return _homogeneous


# ---- small collectives tutti.common runs itself (init, elastic state) ----

def allreduce_ints(values, op, name):
    """`values` (Python ints) reduced with `op` over the job, as an int64 array."""
    source = numpy.asarray(values, dtype=numpy.int64)
    result = numpy.empty_like(source)
    return synchronize(requests.submit(
        core.ALLREDUCE, "allreduce", name, None, [source], lambda allocated: result,
        outputs=[result], op=op))


def broadcast_bytes(payload, root_rank, name):
    """The bytes `payload` of global rank `root_rank`, on every rank (other ranks pass
    anything, e.g. b"")."""
    length = numpy.array([len(payload)], numpy.int64)
    synchronize(requests.submit(core.BROADCAST, "broadcast", name + ".length", None,
                                [length], lambda allocated: None, outputs=[length],
                                root_rank=root_rank))
    buffer = numpy.zeros(int(length[0]), numpy.uint8)
    if basics.rank() == root_rank and payload:
        buffer[:] = numpy.frombuffer(payload, numpy.uint8)
    synchronize(requests.submit(core.BROADCAST, "broadcast", name + ".data", None,
                                [buffer], lambda allocated: None, outputs=[buffer],
                                root_rank=root_rank))
    return buffer.tobytes()
