"""Helpers built on the collectives: broadcasting model parameters from one rank."""

import mxnet as mx
from tutti.common import basics
from tutti.common.basics import ReduceOp

from .ops import allreduce_, check_tensor


def _broadcast_(tensor, root_rank, name):
    # The core has no broadcast yet: every rank but the root contributes zeros to a sum,
    # which leaves exactly the root's values everywhere.
    check_tensor(tensor, "broadcast_parameters")
    if basics.rank() != root_rank:
        mx.nd.zeros_like(tensor, out=tensor)
    allreduce_(tensor, op=ReduceOp.Sum, name=name)


def _broadcast_parameter(parameter, root_rank, name):
    arrays = parameter.list_data()
    for index, array in enumerate(arrays):
        _broadcast_(array, root_rank, name if len(arrays) == 1 else "%s.%d" % (name, index))


def _broadcast_when_initialized(parameter, root_rank, name):
    """Broadcasts a parameter whose initialisation Gluon deferred until its shape is known
    (the first forward pass). Every rank runs that pass, so every rank broadcasts it."""
    deferred_init = parameter._init_impl

    def init_then_broadcast(*args, **kwargs):
        deferred_init(*args, **kwargs)
        del parameter._init_impl  # back to the class's method: broadcast only once
        _broadcast_parameter(parameter, root_rank, name)

    parameter._init_impl = init_then_broadcast


def broadcast_parameters(params, root_rank=0, prefix=None):
    """Overwrites parameters on every rank with those of `root_rank`.

    params: a Gluon ParameterDict (e.g. net.collect_params()) or a dict of name -> NDArray
    (e.g. the arg_params of a Module). Entries are matched across ranks by name, so every
    rank must pass the same names. A Gluon parameter whose initialisation is deferred
    (its shape is inferred by the first forward pass) is broadcast right after that
    initialisation. prefix: prepended to the request names, to tell apart broadcasts that
    may be in flight at the same time.

    Like every collective, it returns at once; reading a parameter waits for its value.
    """
    size = basics.size()
    if not isinstance(root_rank, int) or not 0 <= root_rank < size:
        raise ValueError("root_rank must be a rank between 0 and %d, got %r" % (size - 1, root_rank))
    if isinstance(params, (mx.gluon.ParameterDict, dict)):
        items = sorted(params.items())
    else:
        raise TypeError(
            "broadcast_parameters expects a gluon ParameterDict or a dict of NDArrays, got %s"
            % type(params).__name__
        )
    prefix = prefix or ""
    for key, value in items:
        name = "%sbroadcast.%s" % (prefix, key)
        if not isinstance(value, mx.gluon.Parameter):
            _broadcast_(value, root_rank, name)
            continue
        try:
            value.list_data()
        except mx.gluon.parameter.DeferredInitializationError:
            _broadcast_when_initialized(value, root_rank, name)
            continue
        except RuntimeError as exc:  # Gluon's error for a parameter never initialised
            raise RuntimeError(
                "broadcast_parameters: parameter %r has no value (%s); initialize the model "
                "(net.initialize()) before broadcasting it" % (key, exc)
            ) from exc
        _broadcast_parameter(value, root_rank, name)
