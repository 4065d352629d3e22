"""Names of collective requests: the one rule every frontend follows.

The core matches requests across ranks by name, so a name must come out the same on every
rank and be unique among the requests in flight. A request without a name is called

    [<prefix>.]<kind>.noname.<n>[.set<id>]      e.g. torch.allreduce.noname.3.set1

where n counts the unnamed requests of that frontend (prefix), kind and process set in the
running session, in call order. Every member of a set makes the same calls on it in the same
order, so the names agree, and ranks outside a set do not shift its numbering. join() ends
with restart_numbering() on every rank: before it, ranks may have made different numbers of
calls. A new session (shutdown(), then init()) starts from 0 too.

TensorFlow graphs name their requests when traced (tutti.tensorflow.naming builds that on
set_suffix() here); eager TensorFlow uses request_name() like every other frontend.
"""

import collections
import itertools
import threading

from . import basics, c_api
from .exceptions import InvalidArgumentError

_lock = threading.Lock()
_counters = collections.defaultdict(itertools.count)  # (prefix, kind, set id) -> numbers
_counters_session = None  # basics.session() the counters belong to


def set_suffix(set_id):
    """The part of a generated name that tells process sets apart ("" for the global set)."""
    return "" if set_id == c_api.GLOBAL_PROCESS_SET else ".set%d" % set_id


def checked_name(name):
    """A name the user gave; InvalidArgumentError (a ValueError) unless a non-empty str."""
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError("name must be a non-empty string, got %r" % (name,))
    return name


def automatic_name(kind, set_id, prefix=""):
    """The next name for an unnamed request of `kind` (e.g. "allreduce") on process set
    `set_id`, from the frontend called `prefix` ("" for tutti.numpy, "torch", "tf", ...)."""
    global _counters_session
    with _lock:
        if _counters_session != basics.session():
            _counters.clear()
            _counters_session = basics.session()
        number = next(_counters[(prefix, kind, set_id)])
    head = prefix + "." if prefix else ""
    return "%s%s.noname.%d%s" % (head, kind, number, set_suffix(set_id))


def request_name(name, kind, set_id, prefix=""):
    """`name`, checked, or (for None) the next automatic name. Call it last, once every
    other argument is accepted, so that a refused call consumes no number."""
    if name is None:
        return automatic_name(kind, set_id, prefix)
    return checked_name(name)


def restart_numbering():
    """Numbers unnamed requests from 0 again, in every frontend. Every frontend's join()
    calls it once join has returned, so that ranks which made different numbers of calls
    before join() agree on the names of the next ones."""
    with _lock:
        _counters.clear()
