"""Exceptions raised by tutti.

Every failure reported by the core carries a `tutti_status`; each status has one exception
class here, so callers can catch exactly the kind of failure they care about, or
`TuttiError` for all of them. As in Horovod 0.28.1, a collective that failed (ranks
disagree, a peer died, the transport broke) raises a `HorovodInternalError` (a RuntimeError),
and a bad argument (including a name already in flight) a ValueError.
"""

from .c_api import Status


class HorovodInternalError(RuntimeError):
    """A collective failed: the ranks disagreed about it, a peer failed, or the transport
    broke. Horovod's name for it; elastic training restores the last commit on it."""


class HostsUpdatedInterrupt(RuntimeError):
    """Raised by `State.commit()` in an elastic job when hosts were added or removed:
    every worker leaves the training function at the same commit and the job re-forms.

    `skip_sync`: every worker already holds the committed state (Horovod's flag; tutti
    decides by a collective in `State.sync()` instead, so it is informational).
    """

    def __init__(self, skip_sync=False):
        super().__init__("the job's hosts changed; re-forming at this commit")
        self.skip_sync = skip_sync


class TuttiError(RuntimeError):
    """Base class of every error reported by the tutti core."""

    status = None  # the tutti_status code this class stands for


class NotInitializedError(TuttiError):
    """init() was not called yet, or shutdown() was called."""

    status = Status.ERR_NOT_INITIALIZED


class InvalidArgumentError(TuttiError, ValueError):
    """A bad dtype, reduction, shape, name or environment value, or a name already in
    flight (a ValueError, as in Horovod)."""

    status = Status.ERR_INVALID_ARGUMENT


class PreconditionError(TuttiError, HorovodInternalError):
    """The ranks disagree about a request (shape, dtype, op, ...), or a name is reused."""

    status = Status.ERR_PRECONDITION


class UnsupportedError(TuttiError):
    """A valid request that this build of the core cannot carry out."""

    status = Status.ERR_UNSUPPORTED


class AbortedError(TuttiError, HorovodInternalError):
    """The job is shutting down or a peer failed; the request did not complete."""

    status = Status.ERR_ABORTED


class InternalError(TuttiError, HorovodInternalError):
    """A transport failure or a defect in the core."""

    status = Status.ERR_INTERNAL


_BY_STATUS = {
    cls.status: cls
    for cls in (
        NotInitializedError,
        InvalidArgumentError,
        PreconditionError,
        UnsupportedError,
        AbortedError,
        InternalError,
    )
}


def error_for_status(status, message):
    """The exception for a non-OK `status` with the core's `message`.

    An unknown status (a newer core) becomes a plain TuttiError that still shows the code.
    """
    cls = _BY_STATUS.get(int(status))
    if cls is None:
        return TuttiError("tutti status %d: %s" % (int(status), message))
    return cls(message)
