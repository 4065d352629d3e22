"""Hands torch tensors to the core as one request and collects the result.

Every collective is asynchronous underneath: a request (single or grouped) is queued with
the native `enqueue`, one crossing into the core, which returns an int handle;
`synchronize(handle)` waits for it with the native `wait`, which also hands back the
request's outputs, and builds the result. The native library keeps the only record of a
request in flight; the handle itself carries how to build its result. The native calls
(src/python_entry.cc) raise errors reported by the core as the matching tutti.common
exception (all are RuntimeError subclasses) with the core's message.
"""

import numbers
import threading

import torch
from tutti.common import core, naming, process_sets
from tutti.common.basics import PLAIN_REDUCE_CODES, ReduceOp, core_reduce_op
from tutti.common.exceptions import InvalidArgumentError

from ._native import entry

_enqueue, _run, _poll, _wait = entry.enqueue, entry.run, entry.poll, entry.wait
_wait_done = entry.wait_done
_contiguous_dense = entry.contiguous_dense
_global_set = process_sets.global_process_set
_GLOBAL_SET_ID = core.GLOBAL_PROCESS_SET

# synchronize() waits in slices this long, so that Ctrl-C is noticed between them; the
# cycles a blocking call runs itself (run_blocking) stop after as long.
_WAIT_SLICE_SECONDS = 0.5


class _ThreadState(threading.local):
    blocking = False  # set by run_blocking() while its call submits: that request is run


_this_thread = _ThreadState()


class Handle(int):
    """A request in flight: an int, as Horovod's handles are, that also holds `finish`,
    the function that builds the request's result from its output tensors and integer
    results, and `results`, those two once the `run` op has collected them; or, for a plain
    in-place allreduce, `tensor`, its result."""

    finish = None
    results = None
    tensor = None


def check_tensor(tensor):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("expected a torch.Tensor, got %s" % type(tensor).__name__)
    if tensor.layout != torch.strided:
        # torch's own error from .contiguous() would not say what to do instead.
        raise InvalidArgumentError(
            "tutti collectives take dense tensors, not a %s tensor: call .to_dense() first "
            "(DistributedOptimizer handles sparse gradients itself; see sparse_as_dense)"
            % str(tensor.layout).replace("torch.", ""))
    return tensor


def tensor_list(tensors, what):
    """The tensors of a grouped call, checked."""
    if isinstance(tensors, torch.Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError("%s needs a list of tensors, got %s" % (what, type(tensors).__name__))
    if not tensors:
        raise InvalidArgumentError("%s needs at least one tensor" % what)
    if _contiguous_dense(tensors):  # the common case in one native call, not one per tensor
        return _DenseList(tensors)
    return [check_tensor(t) for t in tensors]


class _DenseList(list):
    """Tensors that contiguous_dense() accepted: data_list() takes them without asking again."""


def check_name(name):
    """A request's name as given: None or "" (as in Horovod) for none, else tutti.common's
    rule for names."""
    if name is None or (isinstance(name, str) and not name):
        return None
    return naming.checked_name(name)


def scale(value, label):
    if type(value) is float:  # the common case, without the slower abstract check below
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s must be a real number, got %r" % (label, value))
    return float(value)


def integer(value, label):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be an integer, got %r" % (label, value))
    return int(value)


def data_of(tensor):
    """A checked tensor's data as a contiguous tensor outside autograd (a copy only when
    needed)."""
    if tensor.requires_grad:  # detach() makes a new tensor object: only when needed
        tensor = tensor.detach()
    return tensor.contiguous()


def data_list(tensors):
    """data_of() of each checked tensor of a list; the list itself when every tensor is
    contiguous already (one native check: a request reads its tensors' memory, never their
    autograd state, so a tensor that requires grad needs no detached copy of itself)."""
    if type(tensors) is _DenseList or _contiguous_dense(tensors):
        return tensors
    return [data_of(t) for t in tensors]


def contiguous(tensor):
    """check_tensor(), then data_of()."""
    return data_of(check_tensor(tensor))


def _arguments(collective, kind, name, process_set, inputs, outputs, op, prescale, postscale,
               root_rank, splits):
    """The native calls' arguments; names the request (last: a call refused by a check
    before this takes no number)."""
    set_id = process_sets.request_id(process_set)
    if type(name) is not str or not name:  # (a given name needs no numbering)
        name = naming.request_name(check_name(name), kind, set_id, prefix="torch")
    return (collective, name, kind, set_id, inputs, outputs, core_reduce_op(op),
            float(prescale), float(postscale), int(root_rank), splits)


def run(collective, kind, name, process_set, inputs, outputs=None, op=0, prescale=1.0,
        postscale=1.0, root_rank=0, splits=None):
    """submit() and synchronize() in one, for a synchronous call that builds its result
    itself: runs the request through the native `run` (as run_blocking does, without a
    handle) and returns its (outputs, extra)."""
    number, done, outputs, extra = _run(*_arguments(
        collective, kind, name, process_set, inputs, outputs, op, prescale, postscale,
        root_rank, splits), _WAIT_SLICE_SECONDS)
    while not done:  # in slices, so that Ctrl-C is noticed
        done, outputs, extra = _wait(number, _WAIT_SLICE_SECONDS)
    return outputs, extra


# tutti.common's plain reductions, and None: the default, Average.
_PLAIN_REDUCE_CODES = {**PLAIN_REDUCE_CODES, None: PLAIN_REDUCE_CODES[ReduceOp.Average]}
entry.bind_plain(_global_set, _PLAIN_REDUCE_CODES, _WAIT_SLICE_SECONDS)


# The short paths of one in-place tensor (src/python_entry.cc) take a request straight to
# the native calls when its arguments need no conversion or check in Python: a non-empty
# str name, the global set, op None (Average) or a ReduceOp other than Adasum, float
# factors, a dense contiguous tensor (a parameter too: the request reads its memory, not its
# autograd state). Anything else is declined (nothing done) and takes the general path,
# which gives every error its message. Why: after an idle spell each Python function a call
# runs costs tens of microseconds on small VMs, and a gradient loop pays for each one per
# tensor.
#
# run_plain(collective, kind, tensor, name, op, prescale, postscale, process_set[,
# root_rank]): run() of one such tensor (a broadcast's with root_rank, an int; its op and
# factors are ignored); True once done (raising the request's error), False when declined.
run_plain = entry.run_plain
# allgather_plain(tensor, name, process_set): allgather() of one such tensor that autograd
# need not follow; the gathered tensor, or None when declined.
allgather_plain = entry.allgather_plain
_enqueue_plain = entry.enqueue_plain


def submit_plain_in_place(collective, kind, tensor, name, op, prescale, postscale,
                          process_set):
    """submit() of one such tensor through the native `enqueue_plain` (unless a
    run_blocking() is under way); synchronize() returns the tensor. None, having done
    nothing, when declined."""
    if _this_thread.blocking:
        return None
    number = _enqueue_plain(collective, kind, tensor, name, op, prescale, postscale,
                            process_set)
    if number is None:
        return None
    handle = Handle(number)
    handle.tensor = tensor
    return handle


def submit(collective, kind, name, process_set, inputs, finish, outputs=None, op=0,
           prescale=1.0, postscale=1.0, root_rank=0, splits=None):
    """Queues one request and returns its handle. inputs (and outputs, when the result
    lands in given tensors) are contiguous CPU tensors; without outputs the core
    allocates them. finish(outputs, extra) builds what synchronize() returns; extra holds
    alltoall's received splits or join's last rank."""
    arguments = _arguments(collective, kind, name, process_set, inputs, outputs, op, prescale,
                           postscale, root_rank, splits)
    if _this_thread.blocking:
        _this_thread.blocking = False  # only the call's own request
        number, done, outputs, extra = _run(*arguments, _WAIT_SLICE_SECONDS)
        handle = Handle(number)
        if done:  # collected already: synchronize() only builds the result
            handle.results = (outputs, extra)
    else:
        handle = Handle(_enqueue(*arguments))
    handle.finish = finish
    return handle


def run_blocking(start, *args):
    """`synchronize(start(*args))` for a caller that waits right away: the one request
    start() submits goes through the native `run` (tutti_run), so while the core's
    thread is idle the cycles that negotiate and execute it run on this thread, without
    the GIL, a hand-off to the core's thread or a wake-up of either."""
    _this_thread.blocking = True
    try:
        handle = start(*args)
    finally:
        _this_thread.blocking = False
    return synchronize(handle)


def poll(handle):
    """True if the request behind `handle` has finished (synchronize() will not block)."""
    return _poll(handle)


def synchronize(handle):
    """Waits for the request behind `handle` and returns its result; raises the request's
    error if it failed. A handle can be synchronized once. sparse_allreduce_async's handle
    is a function, as in Horovod: synchronize() calls it."""
    if callable(handle):
        return handle()
    if type(handle) is Handle and handle.tensor is not None:  # a plain in-place allreduce
        while not _wait_done(handle, _WAIT_SLICE_SECONDS):  # slices: Ctrl-C leaves it pending
            pass
        return handle.tensor
    finish = handle.finish if type(handle) is Handle else None
    if finish is None:
        raise InvalidArgumentError("unknown tutti handle %r: synchronize() takes the handle "
                                   "an *_async call returned" % (handle,))
    results = handle.results
    if results is not None:
        handle.results = None
        return finish(*results)
    while True:  # in slices, so that Ctrl-C leaves the request pending, not lost
        done, outputs, extra = _wait(handle, _WAIT_SLICE_SECONDS)
        if done:
            return finish(outputs, extra)
