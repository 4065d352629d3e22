"""Helpers built on the collectives: broadcasting model parameters and Python objects."""

import pickle

import mxnet as mx
import numpy
from tutti.common import basics, objects, process_sets
from tutti.common.process_sets import global_process_set

from . import requests
from .data_movement import allgather, broadcast_


def _broadcast_(tensor, root_rank, name):
    requests.check_tensor(tensor, "broadcast_parameters")
    broadcast_(tensor, root_rank, name=name)


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
        raise ValueError("root_rank must be a rank between 0 and %d, got %r"
                         % (size - 1, root_rank))
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


def _part(name, suffix):
    """The request name of one step of an object collective (None: numbered automatically)."""
    return None if name is None else "%s.%s" % (name, suffix)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns `obj` of global rank `root_rank` (a member of the set, as in Horovod) on every
    rank of the set.

    The object is serialized with cloudpickle on the root; the others pass anything (it is ignored). Waits for
    the result."""
    requests.check_initialized("broadcast_object")
    process_sets.request_id(process_set)  # an unregistered set, or a non-member: refused here
    is_root = basics.rank() == root_rank  # a global rank, also on a process set
    payload = numpy.frombuffer(objects.dumps(obj), dtype=numpy.uint8) if is_root else None
    length = mx.nd.array([payload.size if is_root else 0], dtype="int64")
    broadcast_(length, root_rank, name=_part(name, "length"), process_set=process_set)
    size = int(length.asscalar())
    data = mx.nd.array(payload, dtype="uint8") if is_root else mx.nd.zeros((size,), dtype="uint8")
    broadcast_(data, root_rank, name=_part(name, "data"), process_set=process_set)
    return obj if is_root else pickle.loads(data.asnumpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of `obj` of every rank of the set, in rank order (serialized with cloudpickle)."""
    requests.check_initialized("allgather_object")
    payload = numpy.frombuffer(objects.dumps(obj), dtype=numpy.uint8)
    lengths = allgather(mx.nd.array([payload.size], dtype="int64"),
                        name=_part(name, "lengths"), process_set=process_set).asnumpy()
    # An empty pickle cannot occur, so every rank contributes at least one byte.
    gathered = allgather(mx.nd.array(payload, dtype="uint8"), name=_part(name, "data"),
                         process_set=process_set).asnumpy()
    results, offset = [], 0
    for length in lengths:
        results.append(pickle.loads(gathered[offset:offset + int(length)].tobytes()))
        offset += int(length)
    return results
