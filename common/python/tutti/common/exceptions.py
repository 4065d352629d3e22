"""Exceptions raised by tutti.

Every failure reported by the core carries a `tutti_status`; each status has one exception
class here, so callers can catch exactly the kind of failure they care about, or
`TuttiError` for all of them.
"""


class TuttiError(RuntimeError):
    """Base class of every error reported by the tutti core."""

    status = None  # the tutti_status code this class stands for


class NotInitializedError(TuttiError):
    """init() was not called yet, or shutdown() was called."""

    status = 1


class InvalidArgumentError(TuttiError):
    """A bad dtype, reduction, shape, name or environment value."""

    status = 2


class PreconditionError(TuttiError):
    """The ranks disagree about a request (shape, dtype, op, ...), or a name is reused."""

    status = 3


class UnsupportedError(TuttiError):
    """A valid request that this build of the core cannot carry out."""

    status = 4


class AbortedError(TuttiError):
    """The job is shutting down or a peer failed; the request did not complete."""

    status = 5


class InternalError(TuttiError):
    """A transport failure or a defect in the core."""

    status = 6


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
