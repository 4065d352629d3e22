"""Helpers built on the collectives: broadcast_variables, broadcast_ (in place),
broadcast_object, broadcast_object_fn and allgather_object.

The object helpers return Python objects, so their collectives must run when they are
called: eagerly they do; inside tf.function they run eagerly while the function is traced
(like any Python code in it: the object is taken once per trace, as tf.function takes
Python values); in a TF1-style graph they run through a session (`session`, else the
default session), as in Horovod.
"""

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import func_graph
from tutti.common import basics, objects
from tutti.common.process_sets import global_process_set

from .data_movement import allgather, broadcast

# Unsigned types the core does not know travel as the signed type of the same width
# (Keras keeps random seeds in uint32 variables).
_BITCAST = {tf.uint32: tf.int32, tf.uint64: tf.int64}


def _broadcast_value(variable, root_rank, process_set, name=None):
    value = tf.convert_to_tensor(variable)
    carrier = _BITCAST.get(value.dtype)
    if carrier is None:
        return broadcast(value, root_rank, name=name, process_set=process_set)
    sent = broadcast(tf.bitcast(value, carrier), root_rank, name=name,
                     process_set=process_set)
    return tf.bitcast(sent, value.dtype)


def _sub_name(name, part):
    return None if name is None else "%s.%s" % (name, part)


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """Assigns rank `root_rank`'s value to each of `variables` in place, on every rank of
    `process_set`, and returns their new values (a list of tensors), like Horovod's
    broadcast_."""
    variables = list(variables)
    assignments = [v.assign(_broadcast_value(v, root_rank, process_set, _sub_name(name, i)))
                   for i, v in enumerate(variables)]
    if tf.executing_eagerly():
        return [tf.convert_to_tensor(v) for v in variables]
    with tf.control_dependencies([a for a in assignments if a is not None]):
        return [tf.identity(tf.convert_to_tensor(v)) for v in variables]


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns rank `root_rank`'s value to every variable of `variables` on every rank of
    `process_set` (e.g. model.variables, so that all replicas start alike).

    inplace: accepted as in Horovod (an in-place broadcast saves a temporary copy there);
        the variables end up the same either way.
    Eagerly the variables are assigned before it returns; inside tf.function (or a graph)
    it returns an op that groups the assignments."""
    del inplace  # every assignment already writes into the variable
    assignments = [v.assign(_broadcast_value(v, root_rank, process_set)) for v in variables]
    if tf.executing_eagerly():
        return None
    return tf.group(*assignments)


# ---- Python objects ------------------------------------------------------------------

def _as_bytes(obj):
    return np.frombuffer(objects.dumps(obj), dtype=np.uint8)


def _tracing_function():
    return (not tf.executing_eagerly() and
            isinstance(tf.compat.v1.get_default_graph(), func_graph.FuncGraph))


def _runner(session):
    """Turns tensors into numpy values: directly when eager, else with a session."""
    if tf.executing_eagerly():
        return lambda tensor: tensor.numpy()
    session = session or tf.compat.v1.get_default_session()
    if session is None:
        raise ValueError("in graph mode the object collectives need a session: pass "
                         "session= or make one the default session")
    return session.run


def broadcast_object(obj, root_rank=0, session=None, name=None,
                     process_set=global_process_set):
    """Returns rank `root_rank`'s `obj` (any object cloudpickle can serialize) on every
    rank of `process_set` (`root_rank` is a global rank, as in Horovod). Works eagerly, inside tf.function (at trace time) and in
    TF1-style graphs with a session."""
    if _tracing_function():
        with tf.init_scope():
            return broadcast_object(obj, root_rank, session, name, process_set)
    run = _runner(session)
    is_root = basics.rank() == root_rank
    data = _as_bytes(obj) if is_root else np.zeros([0], np.uint8)
    length = run(broadcast(tf.constant([data.shape[0]], tf.int64), root_rank,
                           name=_sub_name(name, "size"), process_set=process_set))
    if not is_root:
        data = np.zeros([int(length[0])], np.uint8)
    data = run(broadcast(tf.constant(data), root_rank, name=_sub_name(name, "data"),
                         process_set=process_set))
    return obj if is_root else objects.loads(data.tobytes())


def broadcast_object_fn(root_rank=0, session=None, name=None,
                        process_set=global_process_set):
    """Returns a function `bcast(obj)` that broadcasts `obj` from `root_rank` like
    broadcast_object(). In a TF1-style graph its ops are built once here and run through
    the session at each call, as in Horovod; elsewhere each call is a broadcast_object()."""
    name = name or "broadcast_object_fn"
    if tf.executing_eagerly() or _tracing_function():
        return lambda obj: broadcast_object(obj, root_rank, session, name, process_set)
    size_in = tf.compat.v1.placeholder(tf.int64, [1], name="bcast_object_size")
    size_out = broadcast(size_in, root_rank, name=name + ".size", process_set=process_set)
    data_in = tf.compat.v1.placeholder(tf.uint8, [None], name="bcast_object_data")
    data_out = broadcast(data_in, root_rank, name=name + ".data", process_set=process_set)

    def bcast(obj):
        run = _runner(session)
        is_root = basics.rank() == root_rank
        data = _as_bytes(obj) if is_root else np.zeros([0], np.uint8)
        length = run(size_out, feed_dict={size_in: [data.shape[0]]})
        if not is_root:
            data = np.zeros([int(length[0])], np.uint8)
        data = run(data_out, feed_dict={data_in: data})
        return obj if is_root else objects.loads(data.tobytes())

    return bcast


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Returns the list of every rank's `obj` (any object cloudpickle can serialize), in
    rank order of `process_set`. Works eagerly, inside tf.function (at trace time) and in
    TF1-style graphs with a session."""
    if _tracing_function():
        with tf.init_scope():
            return allgather_object(obj, session, name, process_set)
    run = _runner(session)
    data = _as_bytes(obj)
    lengths = run(allgather(tf.constant([data.shape[0]], tf.int64),
                            name=_sub_name(name, "sizes"), process_set=process_set))
    gathered = run(allgather(tf.constant(data), name=_sub_name(name, "data"),
                             process_set=process_set))
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return [objects.loads(gathered[offsets[i]:offsets[i + 1]].tobytes())
            for i in range(len(lengths))]


def broadcast_global_variables(root_rank):
    """Broadcasts every global variable of a TF1-style graph from `root_rank` (returns the
    op to run). Eagerly there are no global variables: RuntimeError, as in Horovod."""
    if tf.executing_eagerly():
        raise RuntimeError(
            "hvd.broadcast_global_variables() does not support eager execution. "
            "Please use `hvd.broadcast_variables(<model/optimizer variables>)` instead.")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)
