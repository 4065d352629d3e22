"""The public collectives of tutti.tensorflow, with Horovod's signatures.

Every function works eagerly and inside tf.function, on tensors, variables and anything
tf.convert_to_tensor accepts. Grouped functions accept tensors of mixed dtypes (one
request per dtype). Failures the core reports (e.g. ranks disagreeing on dtype or shape)
raise tf.errors.FailedPreconditionError with the core's message; invalid arguments raise
tf.errors.InvalidArgumentError, ValueError or TypeError, as Horovod does: a process set
this rank is not in raises tf.errors.InvalidArgumentError, one that is not registered
ValueError.
"""

import numbers

import tensorflow as tf
from tutti.common import adasum, core
from tutti.common.basics import Adasum, Average, ReduceOp, Sum, resolve_reduce_op
from tutti.common.exceptions import InvalidArgumentError as _TuttiInvalidArgument
from tutti.common.process_sets import ProcessSet, global_process_set, request_id

from . import ops
from .compression import Compression


def _registered_elsewhere(process_set):
    """True for a registered process set that this rank is not a member of."""
    set_id = getattr(process_set, "process_set_id", None)
    return (isinstance(process_set, ProcessSet) and set_id is not None and
            core.lib.tutti_process_set_size(set_id) >= 0)


def _process_set_id(process_set):
    try:
        return request_id(process_set)
    except _TuttiInvalidArgument as error:
        if _registered_elsewhere(process_set):
            raise tf.errors.InvalidArgumentError(None, None, str(error)) from None
        raise ValueError(str(error)) from None


def _set_size(process_set):
    return (process_set or global_process_set).size()


# The element types the core knows.
SUPPORTED_DTYPES = (tf.uint8, tf.int8, tf.uint16, tf.int16, tf.int32, tf.int64, tf.float16,
                    tf.bfloat16, tf.float32, tf.float64, tf.bool)


def _dense(tensor, what):
    if isinstance(tensor, tf.IndexedSlices):
        raise TypeError("%s takes dense tensors, not tf.IndexedSlices" % what)
    tensor = tf.convert_to_tensor(tensor)
    if tensor.dtype not in SUPPORTED_DTYPES:
        raise TypeError("%s: tutti does not support tensors of type %s; supported: %s"
                        % (what, tensor.dtype.name,
                           ", ".join(d.name for d in SUPPORTED_DTYPES)))
    return tensor


def _by_dtype(tensors, submit):
    """Runs `submit(list_of_tensors)` once per dtype (the core groups one dtype per
    request) and returns the results in the order of `tensors`."""
    results = [None] * len(tensors)
    groups = {}
    for index, tensor in enumerate(tensors):
        groups.setdefault(tensor.dtype, []).append(index)
    for indices in groups.values():  # insertion order: the same on every rank
        for index, result in zip(indices, submit([tensors[i] for i in indices])):
            results[index] = result
    return results


def _group_name(name, part, parts):
    return name if not name or parts == 1 else "%s.%d" % (name, part)


def _grouped(tensors, name, submit):
    """_by_dtype with a distinct request name per dtype."""
    dtypes = len({t.dtype for t in tensors})
    counter = iter(range(dtypes))
    return _by_dtype(tensors, lambda group: submit(group, _group_name(name, next(counter),
                                                                      dtypes)))


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
    set_id = _process_set_id(process_set)
    values = ops._allgather(slices.values, _sub(name, "values"), set_id)
    indices = ops._allgather(slices.indices, _sub(name, "indices"), set_id)
    if op == Average:
        values = values / tf.cast(_set_size(process_set), values.dtype)
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
    set_id = _process_set_id(process_set)
    compression = compression or Compression.none
    with tf.device(device_dense):
        compressed, context = compression.compress(_dense(tensor, "allreduce"))
        reduced = ops._allreduce(compressed, op, prescale_factor, postscale_factor, name,
                                     set_id)
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
    set_id = _process_set_id(process_set)
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
            compressed, context = compression.compress(_dense(tensor, "grouped_allreduce"))
            dense.append((index, compressed))
            contexts.append(context)
    if dense:
        with tf.device(device_dense):
            reduced = _grouped([t for _, t in dense], name, lambda group, group_name:
                               ops._grouped_allreduce(group, op, prescale_factor,
                                                          postscale_factor, group_name,
                                                          set_id))
        for (index, _), value, context in zip(dense, reduced, contexts):
            results[index] = compression.decompress(value, context)
    return results


# ---- allgather, broadcast, alltoall ------------------------------------------------------

def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Concatenates the tensors of every rank of `process_set` along the first dimension,
    in rank order. The first dimension may differ between ranks; the others and the dtype
    must agree. Differentiable: the gradient is this rank's rows of the averaged output
    gradient."""
    del ignore_name_scope
    return ops._allgather(_dense(tensor, "allgather"), name, _process_set_id(process_set))


def grouped_allgather(tensors, name=None, ignore_name_scope=False,
                      process_set=global_process_set):
    """allgather() of a list of tensors as one request per dtype; returns a list."""
    del ignore_name_scope
    tensors = [_dense(t, "grouped_allgather") for t in tensors]
    if not tensors:
        return []
    set_id = _process_set_id(process_set)
    return _grouped(tensors, name, lambda group, group_name:
                    ops._grouped_allgather(group, group_name, set_id))


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """Returns rank `root_rank`'s tensor (a rank within `process_set`) on every rank of the
    set; all pass tensors of the same dtype and shape. Differentiable: the root receives
    the average of every rank's output gradient, the others zeros."""
    del ignore_name_scope
    if isinstance(root_rank, bool) or not isinstance(root_rank, numbers.Integral):
        raise TypeError("root_rank must be an integer, got %r" % (root_rank,))
    return ops._broadcast(_dense(tensor, "broadcast"), root_rank, name,
                              _process_set_id(process_set))


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
    tensor = _dense(tensor, "alltoall")
    set_id = _process_set_id(process_set)
    if splits is None:
        if tensor.shape.rank == 0:
            raise ValueError("alltoall needs a tensor of rank >= 1, got a scalar")
        sent = _even_splits(tensor, _set_size(process_set))
    else:
        sent = _splits_tensor(splits)
    received, received_splits = ops._alltoall(tensor, sent, name, set_id)
    return received if splits is None else (received, received_splits)


# ---- reducescatter ---------------------------------------------------------------------

def _scatterable(tensor, what):
    """A dense tensor of rank >= 1 (Horovod refuses scalars: InvalidArgumentError eagerly,
    ValueError while building a graph, like an op's shape check)."""
    tensor = _dense(tensor, what)
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
    set_id = _process_set_id(process_set)
    compression = compression or Compression.none
    with tf.device(device_dense):
        compressed, context = compression.compress(tensor)
        part = ops._reducescatter(compressed, op, prescale_factor, postscale_factor,
                                      name, set_id)
        return compression.decompress(part, context)


def grouped_reducescatter(tensors, device_dense="", compression=Compression.none,
                          op=Average, process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0, name=None):
    """reducescatter() of a list of tensors as one request per dtype; returns a list."""
    op = resolve_reduce_op(op)
    tensors = [_scatterable(t, "grouped_reducescatter") for t in tensors]
    if not tensors:
        return []
    set_id = _process_set_id(process_set)
    compression = compression or Compression.none
    compressed = [compression.compress(t) for t in tensors]
    with tf.device(device_dense):
        parts = _grouped([c for c, _ in compressed], name, lambda group, group_name:
                         ops._grouped_reducescatter(group, op, prescale_factor,
                                                        postscale_factor, group_name, set_id))
    return [compression.decompress(p, context) for p, (_, context) in zip(parts, compressed)]


# ---- join and barrier ------------------------------------------------------------------

def join():
    """Tells the other ranks that this rank has no more allreduces to submit and waits
    until every rank has joined. Meanwhile this rank contributes zeros to the allreduces
    the others still make (Average still divides by the full job size); any other
    collective fails while a rank has joined. Returns the global rank that joined last,
    as an int32 scalar tensor.

    Eagerly, every rank numbers its unnamed requests from 0 again afterwards, so that
    ranks which made different numbers of calls agree on the names of the next ones."""
    return ops._join()


def barrier(process_set=global_process_set):
    """Returns once every rank of `process_set` has called barrier()."""
    return ops._barrier(_process_set_id(process_set))
