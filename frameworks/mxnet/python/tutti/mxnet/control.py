"""The collectives without data: barrier and join."""

import mxnet as mx
from tutti.common import control as _control
from tutti.common.exceptions import TuttiError
from tutti.common.process_sets import global_process_set

from . import requests


def barrier(process_set=global_process_set):
    """Returns once every rank of `process_set` has called barrier()."""
    requests.check_initialized("barrier")
    try:
        _control.barrier(process_set)
    except TuttiError as exc:
        raise mx.base.MXNetError("tutti barrier failed: %s" % exc) from exc


def join():
    """Tells the other ranks that this rank has no more allreduces to submit and waits until
    every rank has joined; meanwhile this rank contributes zeros to the allreduces the others
    still make (Average still divides by the full job size). Returns the global rank that
    joined last.

    Waits first for the work already pushed to MXNet's engine, so that this rank's own
    earlier requests reach the core before it announces that it has joined."""
    requests.check_initialized("join")
    mx.nd.waitall()
    try:
        return _control.join()
    except TuttiError as exc:
        raise mx.base.MXNetError("tutti join failed: %s" % exc) from exc
