"""The collectives of tutti.tensorflow that move data, with Horovod's signatures:
allgather, grouped_allgather, broadcast and alltoall. Like the reductions, they work eagerly
and inside tf.function; errors: see requests.py.
"""

import numbers

import tensorflow as tf
from tutti.common.process_sets import global_process_set, set_size

from . import requests


def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Concatenates the tensors of every rank of `process_set` along the first dimension,
    in rank order. The first dimension may differ between ranks; the others and the dtype
    must agree. Differentiable: the gradient is this rank's rows of the averaged output
    gradient."""
    del ignore_name_scope
    return requests.allgather_request(requests.dense(tensor, "allgather"), name,
                                      requests.process_set_id(process_set))


def grouped_allgather(tensors, name=None, ignore_name_scope=False,
                      process_set=global_process_set):
    """allgather() of a list of tensors as one request per dtype; returns a list."""
    del ignore_name_scope
    tensors = [requests.dense(t, "grouped_allgather") for t in tensors]
    if not tensors:
        return []
    set_id = requests.process_set_id(process_set)
    return requests.grouped(tensors, name, lambda group, group_name:
                            requests.grouped_allgather_request(group, group_name, set_id))


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """Returns rank `root_rank`'s tensor (a global rank, a member of `process_set`, as in
    Horovod) on every rank of the set; all pass tensors of the same dtype and shape. Differentiable: the root receives
    the average of every rank's output gradient, the others zeros."""
    del ignore_name_scope
    if isinstance(root_rank, bool) or not isinstance(root_rank, numbers.Integral):
        raise TypeError("root_rank must be an integer, got %r" % (root_rank,))
    return requests.broadcast_request(requests.dense(tensor, "broadcast"), root_rank, name,
                                      requests.process_set_id(process_set))


def _splits_tensor(splits):
    """The user's splits as an int32 vector; Horovod accepts any numeric tensor."""
    splits = tf.convert_to_tensor(splits)
    if not (splits.dtype.is_integer or splits.dtype.is_floating):
        raise TypeError("alltoall splits must be numbers, got %s" % splits.dtype.name)
    if splits.shape.rank is not None and splits.shape.rank != 1:
        raise ValueError("alltoall splits must be a vector, got shape %s" % splits.shape)
    return tf.cast(splits, tf.int32)


def _even_splits(tensor, parts):
    """Rows for each of `parts` ranks when no splits are given: as even as possible, the
    first `rows % parts` ranks one more (Horovod's split)."""
    rows = tf.shape(tensor, out_type=tf.int32)[0]
    extra = tf.cast(tf.range(parts) < rows % parts, tf.int32)
    return rows // parts + extra


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """Sends part j of `tensor` (along the first dimension) to rank j of `process_set` and
    returns the parts every rank sent here, concatenated in rank order.

    splits: rows for each rank of the set (list or 1-D numeric tensor). None splits the
        first dimension as evenly as possible, the first ranks getting one more row when
        the set size does not divide it.
    Returns, as Horovod does: with `splits`, (received, received_splits), the second an
    int32 vector of how many rows came from each rank; without `splits`, received alone.
    Differentiable: the gradient goes back the way the data came."""
    del ignore_name_scope
    tensor = requests.dense(tensor, "alltoall")
    set_id = requests.process_set_id(process_set)
    if splits is None:
        if tensor.shape.rank == 0:
            raise ValueError("alltoall needs a tensor of rank >= 1, got a scalar")
        sent = _even_splits(tensor, set_size(set_id))
    else:
        sent = _splits_tensor(splits)
    received, received_splits = requests.alltoall_request(tensor, sent, name, set_id)
    return received if splits is None else (received, received_splits)
