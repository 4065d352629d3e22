"""The reducing collectives of tutti.tensorflow, with Horovod's signatures: allreduce,
grouped_allreduce, reducescatter and grouped_reducescatter, and the low-level variants
Horovod's mpi_ops module offers (_allreduce, ...).

Every function works eagerly and inside tf.function, on tensors, variables and anything
tf.convert_to_tensor accepts. Grouped functions accept tensors of mixed dtypes (one
request per dtype). Errors: see requests.py.
"""

import tensorflow as tf
from tutti.common import adasum
from tutti.common.basics import Adasum, Average, ReduceOp, Sum, resolve_reduce_op
from tutti.common.process_sets import global_process_set, set_size

from . import requests
from .compression import Compression


# ---- allreduce -----------------------------------------------------------------------------

def _check_sparse_request(op, prescale_factor, postscale_factor):
    if op not in (Average, Sum):
        raise NotImplementedError("Only Sum and Average ops are supported with "
                                  "tf.IndexedSlices, not %s" % ReduceOp(op).name)
    if prescale_factor != 1.0 or postscale_factor != 1.0:
        raise NotImplementedError("Pre/postscale_factor are not supported with "
                                  "tf.IndexedSlices")


def _sparse_allreduce(slices, op, prescale_factor, postscale_factor, name, process_set):
    """Allreduce of tf.IndexedSlices: every rank's rows and indices, gathered (rows named
    by several ranks add up when the result is densified). Average divides the values by
    the set size with TensorFlow's true division, as Horovod does (integer values become
    floating point)."""
    if op == Adasum:  # Horovod's exception and message
        raise NotImplementedError("The Adasum reduction does not currently support sparse "
                                  "tensors. As a workaround please pass sparse_as_dense=True "
                                  "to DistributedOptimizer")
    _check_sparse_request(op, prescale_factor, postscale_factor)
    set_id = requests.process_set_id(process_set)
    values = requests.allgather_request(slices.values, _sub(name, "values"), set_id)
    indices = requests.allgather_request(slices.indices, _sub(name, "indices"), set_id)
    if op == Average:
        values = values / tf.cast(set_size(set_id), values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=slices.dense_shape)


def _sub(name, part):
    return None if not name else "%s.%s" % (name, part)


def allreduce(tensor, average=None, device_dense="", device_sparse="",
              compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0, name=None, process_set=global_process_set,
              ignore_name_scope=False):
    """Reduces `tensor` over the ranks of `process_set`; every rank gets the result.

    tensor: a tf.Tensor or tf.Variable with the same dtype and shape on every rank, or
        tf.IndexedSlices, which are allgathered (values and indices) and returned as
        tf.IndexedSlices; Average then divides the values by the number of ranks.
    op: hvd.Average (default), hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max or hvd.Product.
    average: deprecated; True means hvd.Average, False hvd.Sum.
    device_dense, device_sparse: TensorFlow devices for dense and sparse inputs.
    compression: hvd.Compression.none (default) or hvd.Compression.fp16.
    prescale_factor, postscale_factor: multiply the input before and the result after the
        reduction.
    name: names the request across ranks; must be unique among requests in flight.
        Without it a name is generated that is identical on every rank, provided every
        rank issues the same collectives in the same order.
    ignore_name_scope: accepted for Horovod compatibility (names never use name scopes).

    Differentiable for hvd.Sum, hvd.Average and hvd.Adasum (the gradient is the same
    reduction of the output gradients, as in Horovod), and unscaled hvd.Min / hvd.Max.
    """
    del ignore_name_scope
    op = resolve_reduce_op(op, average)
    adasum.check_ranks(op, process_set)
    if isinstance(tensor, tf.IndexedSlices):
        with tf.device(device_sparse):
            return _sparse_allreduce(tensor, op, prescale_factor, postscale_factor, name,
                                     process_set)
    set_id = requests.process_set_id(process_set)
    compression = compression or Compression.none
    with tf.device(device_dense):
        compressed, context = compression.compress(requests.dense(tensor, "allreduce"))
        reduced = requests.allreduce_request(compressed, op, prescale_factor,
                                             postscale_factor, name, set_id)
        return compression.decompress(reduced, context)


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="",
                      compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set,
                      ignore_name_scope=False, name=None):
    """Reduces a list of tensors as one request per dtype (negotiated and completed
    together); returns a list. tf.IndexedSlices in the list are reduced as in allreduce().
    Differentiable like allreduce()."""
    del ignore_name_scope
    op = resolve_reduce_op(op, average)
    adasum.check_ranks(op, process_set)
    tensors = list(tensors)
    if not tensors:
        return []
    set_id = requests.process_set_id(process_set)
    compression = compression or Compression.none
    results = [None] * len(tensors)
    dense, contexts = [], []
    for index, tensor in enumerate(tensors):
        if isinstance(tensor, tf.IndexedSlices):
            with tf.device(device_sparse):
                results[index] = _sparse_allreduce(tensor, op, prescale_factor,
                                                   postscale_factor, _sub(name, index),
                                                   process_set)
        else:
            compressed, context = compression.compress(requests.dense(tensor, "grouped_allreduce"))
            dense.append((index, compressed))
            contexts.append(context)
    if dense:
        with tf.device(device_dense):
            reduced = requests.grouped(
                [t for _, t in dense], name, lambda group, group_name:
                requests.grouped_allreduce_request(group, op, prescale_factor,
                                                   postscale_factor, group_name, set_id))
        for (index, _), value, context in zip(dense, reduced, contexts):
            results[index] = compression.decompress(value, context)
    return results


# ---- reducescatter ---------------------------------------------------------------------

def _scatterable(tensor, what):
    """A dense tensor of rank >= 1 (Horovod refuses scalars: InvalidArgumentError eagerly,
    ValueError while building a graph, like an op's shape check)."""
    tensor = requests.dense(tensor, what)
    if tensor.shape.rank == 0:
        message = "%s does not support scalar inputs" % what
        if tf.executing_eagerly():
            raise tf.errors.InvalidArgumentError(None, None, message)
        raise ValueError(message)
    return tensor


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average,
                  name=None, process_set=global_process_set, ignore_name_scope=False,
                  prescale_factor=1.0, postscale_factor=1.0):
    """Reduces `tensor` over the ranks of `process_set` and returns this rank's part of
    the result along the first dimension: with n rows and k ranks, the first n % k ranks
    get n // k + 1 rows and the others n // k. op: hvd.Average (default) or hvd.Sum
    (also Min, Max, Product, not differentiable). Differentiable: the gradient is the
    allgather of the part gradients (times the set size for hvd.Sum, as in Horovod)."""
    del ignore_name_scope
    op = resolve_reduce_op(op)
    tensor = _scatterable(tensor, "reducescatter")
    set_id = requests.process_set_id(process_set)
    compression = compression or Compression.none
    with tf.device(device_dense):
        compressed, context = compression.compress(tensor)
        part = requests.reducescatter_request(compressed, op, prescale_factor,
                                              postscale_factor, name, set_id)
        return compression.decompress(part, context)


def grouped_reducescatter(tensors, device_dense="", compression=Compression.none,
                          op=Average, process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0, name=None):
    """reducescatter() of a list of tensors as one request per dtype; returns a list."""
    op = resolve_reduce_op(op)
    tensors = [_scatterable(t, "grouped_reducescatter") for t in tensors]
    if not tensors:
        return []
    set_id = requests.process_set_id(process_set)
    compression = compression or Compression.none
    compressed = [compression.compress(t) for t in tensors]
    with tf.device(device_dense):
        parts = requests.grouped(
            [c for c, _ in compressed], name, lambda group, group_name:
            requests.grouped_reducescatter_request(group, op, prescale_factor,
                                                   postscale_factor, group_name, set_id))
    return [compression.decompress(p, context) for p, (_, context) in zip(parts, compressed)]


# ---- Horovod's low-level variants (horovod.tensorflow.mpi_ops) ----

def _allreduce(tensor, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
               ignore_name_scope=False, process_set=global_process_set):
    """allreduce() with Horovod's low-level defaults: op=Sum, no compression."""
    return allreduce(tensor, op=op, prescale_factor=prescale_factor,
                     postscale_factor=postscale_factor, name=name, process_set=process_set,
                     ignore_name_scope=ignore_name_scope)


def _grouped_allreduce(tensors, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
                       ignore_name_scope=False, process_set=global_process_set):
    """grouped_allreduce() with Horovod's low-level defaults (op=Sum)."""
    return grouped_allreduce(tensors, op=op, prescale_factor=prescale_factor,
                             postscale_factor=postscale_factor, process_set=process_set,
                             ignore_name_scope=ignore_name_scope, name=name)


def _reducescatter(tensor, name=None, op=Sum, ignore_name_scope=False,
                   process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter() with Horovod's low-level defaults (op=Sum)."""
    return reducescatter(tensor, op=op, name=name, process_set=process_set,
                         ignore_name_scope=ignore_name_scope, prescale_factor=prescale_factor,
                         postscale_factor=postscale_factor)


def _grouped_reducescatter(tensors, name=None, op=Sum, ignore_name_scope=False,
                           process_set=global_process_set, prescale_factor=1.0,
                           postscale_factor=1.0):
    """grouped_reducescatter() with Horovod's low-level defaults (op=Sum)."""
    del ignore_name_scope
    return grouped_reducescatter(tensors, op=op, process_set=process_set,
                                 prescale_factor=prescale_factor,
                                 postscale_factor=postscale_factor, name=name)
