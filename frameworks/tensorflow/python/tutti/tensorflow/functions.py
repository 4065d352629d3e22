"""Helpers built on the collectives: broadcast_variables, broadcast_object and
allgather_object."""

import pickle

import numpy as np
import tensorflow as tf
from tutti.common import objects
from tutti.common.process_sets import global_process_set

from .collectives import allgather, broadcast


# Unsigned types the core does not know travel as the signed type of the same width
# (Keras keeps random seeds in uint32 variables).
_BITCAST = {tf.uint32: tf.int32, tf.uint64: tf.int64}


def _broadcast_value(variable, root_rank, process_set):
    value = tf.convert_to_tensor(variable)
    carrier = _BITCAST.get(value.dtype)
    if carrier is None:
        return broadcast(value, root_rank, process_set=process_set)
    sent = broadcast(tf.bitcast(value, carrier), root_rank, process_set=process_set)
    return tf.bitcast(sent, value.dtype)


def broadcast_variables(variables, root_rank, process_set=global_process_set):
    """Assigns rank `root_rank`'s value to every variable of `variables` on every rank of
    `process_set` (e.g. model.variables, so that all replicas start alike).

    Eagerly the variables are assigned before it returns; inside tf.function (or a graph)
    it returns an op that groups the assignments."""
    assignments = [v.assign(_broadcast_value(v, root_rank, process_set)) for v in variables]
    if tf.executing_eagerly():
        return None
    return tf.group(*assignments)


def _sub_name(name, part):
    return None if name is None else "%s.%s" % (name, part)


def _as_bytes_tensor(obj):
    payload = objects.dumps(obj)  # cloudpickle, as Horovod
    return tf.constant(np.frombuffer(payload, dtype=np.uint8))


def _require_eager(what):
    if not tf.executing_eagerly():
        raise RuntimeError("%s runs eagerly only (it returns Python objects), not inside "
                           "tf.function" % what)


def broadcast_object(obj, root_rank=0, session=None, name=None,
                     process_set=global_process_set):
    """Returns rank `root_rank`'s `obj` (any picklable object) on every rank of
    `process_set`. Eager only; `session` is accepted for Horovod compatibility."""
    del session
    _require_eager("broadcast_object")
    is_root = (process_set or global_process_set).rank() == root_rank
    data = _as_bytes_tensor(obj) if is_root else tf.zeros([0], tf.uint8)
    length = broadcast(tf.constant([int(data.shape[0])], tf.int64), root_rank,
                       name=_sub_name(name, "size"), process_set=process_set)
    if not is_root:
        data = tf.zeros([int(length[0])], tf.uint8)
    data = broadcast(data, root_rank, name=_sub_name(name, "data"), process_set=process_set)
    return obj if is_root else pickle.loads(data.numpy().tobytes())


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Returns the list of every rank's `obj` (any picklable object), in rank order of
    `process_set`. Eager only; `session` is accepted for Horovod compatibility."""
    del session
    _require_eager("allgather_object")
    data = _as_bytes_tensor(obj)
    lengths = allgather(tf.constant([int(data.shape[0])], tf.int64),
                        name=_sub_name(name, "sizes"), process_set=process_set).numpy()
    gathered = allgather(data, name=_sub_name(name, "data"), process_set=process_set).numpy()
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return [pickle.loads(gathered[offsets[i]:offsets[i + 1]].tobytes())
            for i in range(len(lengths))]
