"""How a TensorFlow tensor becomes a core request: the checks of tensors and process sets,
the collectives as single graph ops (one kernel for every collective, libtutti_tensorflow_ops)
and their gradients.

The op functions here take dense tensors of one dtype and a process set id; the public API
in reductions.py, data_movement.py and control.py adds compression, sparse tensors, mixed
dtypes and argument checks, and mpi_ops.py offers all of it under Horovod's module path.
Failures the core reports (e.g. ranks disagreeing on dtype or shape) raise
tf.errors.FailedPreconditionError with the core's message; invalid arguments raise
tf.errors.InvalidArgumentError, ValueError or TypeError, as Horovod does: a process set
this rank is not in raises tf.errors.InvalidArgumentError, one that is not registered
ValueError.
"""

import tensorflow as tf
from tutti.common import basics
from tutti.common import naming as common_naming
from tutti.common.basics import (DTYPE, Average, ReduceOp, Sum, core_reduce_op,
                                 reduce_op_from_core)
from tutti.common.exceptions import InvalidArgumentError as _TuttiInvalidArgument
from tutti.common.process_sets import ProcessSet, request_id, set_rank, set_size

from . import naming
from ._native import ops as _ops

_REDUCE_OP_NAMES = ", ".join("hvd.%s" % op.name for op in ReduceOp)


def _reduce_op_code(op):
    try:
        op = ReduceOp(op)
    except ValueError:
        raise ValueError("op must be one of %s, not %r" % (_REDUCE_OP_NAMES, op)) from None
    return core_reduce_op(op)  # the attribute holds the C ABI's code


def _request_args(name, kind, process_set_id):
    return dict(tensor_name=naming.request_name(name, kind, process_set_id),
                process_set=int(process_set_id),
                name=naming.op_name(name, "Tutti" + kind.title().replace("_", "")))


def _reduce_args(op, prescale_factor, postscale_factor):
    return dict(reduce_op=_reduce_op_code(op), prescale_factor=float(prescale_factor),
                postscale_factor=float(postscale_factor))


def _run_independently(tensors):
    """Lets a collective inside tf.function run in parallel with the other stateful ops.

    The ops are stateful (never constant-folded), and tf.function chains stateful ops in
    program order by default. Collectives must not be chained: the core fuses requests
    that are pending at the same time, and ranks may reach them in different orders.
    They still always run before the function returns.
    """
    if tf.executing_eagerly():
        return tensors
    first = tensors[0] if isinstance(tensors, (list, tuple)) else tensors
    operation = first if isinstance(first, tf.Operation) else first.op
    manager = getattr(operation.graph, "experimental_acd_manager", None)
    if manager is not None:
        manager.run_independently(operation)
    return tensors


# ---- checks of tensors and process sets --------------------------------------------

def _registered_elsewhere(process_set):
    """True for a process set registered in this session (so refused because this rank is
    not a member)."""
    return isinstance(process_set, ProcessSet) and process_set.process_set_id is not None


def process_set_id(process_set):
    try:
        return request_id(process_set)
    except _TuttiInvalidArgument as error:
        if _registered_elsewhere(process_set):
            raise tf.errors.InvalidArgumentError(None, None, str(error)) from None
        raise ValueError(str(error)) from None


# The element types the core knows, in the order of the C ABI's codes.
SUPPORTED_DTYPES = tuple(tf.as_dtype(name) for name in DTYPE)


def dense(tensor, what):
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


def grouped(tensors, name, submit):
    """_by_dtype with a distinct request name per dtype."""
    dtypes = len({t.dtype for t in tensors})
    counter = iter(range(dtypes))
    return _by_dtype(tensors, lambda group: submit(group, _group_name(name, next(counter),
                                                                      dtypes)))


# ---- the collectives -----------------------------------------------------------------

def _reduction(native_op, kind, grouped):
    """The request function of one reducing op: dense tensors of one dtype (a list when
    `grouped`), the core's `op` and scale factors, a process set id."""
    def request(tensors, op=Average, prescale_factor=1.0, postscale_factor=1.0, name=None,
                process_set_id=0):
        result = _run_independently(native_op(
            tensors, **_reduce_args(op, prescale_factor, postscale_factor),
            **_request_args(name, kind, process_set_id)))
        return list(result) if grouped else result

    request.__name__ = kind + "_request"
    return request


allreduce_request = _reduction(_ops.tutti_allreduce, "allreduce", grouped=False)
grouped_allreduce_request = _reduction(_ops.tutti_grouped_allreduce, "grouped_allreduce",
                                       grouped=True)
reducescatter_request = _reduction(_ops.tutti_reducescatter, "reducescatter", grouped=False)
grouped_reducescatter_request = _reduction(_ops.tutti_grouped_reducescatter,
                                           "grouped_reducescatter", grouped=True)


def allgather_request(tensor, name=None, process_set_id=0):
    return _run_independently(_ops.tutti_allgather(
        tensor, **_request_args(name, "allgather", process_set_id)))


def grouped_allgather_request(tensors, name=None, process_set_id=0):
    return list(_run_independently(_ops.tutti_grouped_allgather(
        tensors, **_request_args(name, "grouped_allgather", process_set_id))))


def broadcast_request(tensor, root_rank, name=None, process_set_id=0):
    return _run_independently(_ops.tutti_broadcast(
        tensor, root_rank=int(root_rank), **_request_args(name, "broadcast", process_set_id)))


def alltoall_request(tensor, splits, name=None, process_set_id=0):
    """Returns (received, received_splits); `splits` is an int32 vector, empty for equal
    parts."""
    received, received_splits = _ops.tutti_alltoall(
        tensor, splits, **_request_args(name, "alltoall", process_set_id))
    _run_independently(received)
    return received, received_splits


def join_request():
    """Joins; eagerly, every frontend numbers its unnamed requests from 0 again after it
    (inside a graph, names are fixed at tracing time)."""
    result = _ops.tutti_join()
    if tf.executing_eagerly():
        common_naming.restart_numbering()
    return _run_independently(result)


def barrier_request(process_set_id=0):
    operation = _ops.tutti_barrier(process_set=int(process_set_id))
    if not tf.executing_eagerly():
        _run_independently([operation])
    return operation


# ---- gradients -------------------------------------------------------------------------

def _reduce_attrs(op):
    return (reduce_op_from_core(op.get_attr("reduce_op")), op.get_attr("prescale_factor"),
            op.get_attr("postscale_factor"), op.get_attr("process_set"))


def _not_differentiable(what, reduce_op, prescale, postscale):
    return NotImplementedError(
        "tutti.tensorflow: the gradient of %s is defined for hvd.Sum and hvd.Average "
        "(and unscaled hvd.Min / hvd.Max for allreduce), not for %s with "
        "prescale_factor=%s and postscale_factor=%s" % (what, reduce_op.name, prescale,
                                                          postscale))


def _selection_gradient(summed, inputs, outputs):
    # Min and Max: the summed output gradient reaches the inputs equal to the result.
    return [s * tf.cast(tf.equal(x, y), s.dtype) for s, x, y in zip(summed, inputs, outputs)]


def _allreduce_gradients(op, grads, grouped):
    """Gradient of an allreduce whose output feeds every rank's loss.

    Sum and Average: the total loss is the sum of the ranks' losses, so each input
    receives the same reduction (same op and scale factors) of the output gradients.
    Adasum: the same reduction of the output gradients too, as Horovod does.
    Min and Max (unscaled): the summed output gradient flows to the inputs that were
    selected, i.e. equal the result; ties each receive it in full.
    """
    reduce_op, prescale, postscale, set_id = _reduce_attrs(op)
    reduce = grouped_allreduce_request if grouped else (
        lambda g, *a, **k: [allreduce_request(g[0], *a, **k)])
    if reduce_op in (Sum, Average, ReduceOp.Adasum):
        return reduce(list(grads), reduce_op, prescale, postscale, process_set_id=set_id)
    if reduce_op in (ReduceOp.Min, ReduceOp.Max) and prescale == 1.0 and postscale == 1.0:
        summed = reduce(list(grads), Sum, process_set_id=set_id)
        return _selection_gradient(summed, op.inputs, op.outputs)
    raise _not_differentiable("allreduce", reduce_op, prescale, postscale)


@tf.RegisterGradient("TuttiAllreduce")
def _allreduce_grad(op, grad):
    return _allreduce_gradients(op, [grad], grouped=False)[0]


@tf.RegisterGradient("TuttiGroupedAllreduce")
def _grouped_allreduce_grad(op, *grads):
    return _allreduce_gradients(op, grads, grouped=True)


def _own_rows(op, grads):
    """Gradient of an allgather: the output gradients averaged over the ranks (the
    gathered tensor feeds every rank's loss), restricted to the rows this rank sent.

    TensorFlow may hand in float32 zeros for an output of another dtype that no loss
    uses; they are cast to the output's dtype so that one grouped request carries all."""
    set_id = op.get_attr("process_set")
    grads = [g if g.dtype == out.dtype else tf.cast(g, out.dtype)
             for g, out in zip(grads, op.outputs)]
    reduced = grouped_allreduce_request(grads, Average, process_set_id=set_id)
    rows = tf.stack([tf.shape(x, out_type=tf.int32)[0] for x in op.inputs])
    counts = tf.reshape(allgather_request(rows, process_set_id=set_id), [-1, len(op.inputs)])
    offsets = tf.reduce_sum(counts[:set_rank(set_id)], axis=0)
    return [g[offsets[i]:offsets[i] + rows[i]] for i, g in enumerate(reduced)]


@tf.RegisterGradient("TuttiAllgather")
def _allgather_grad(op, grad):
    return _own_rows(op, [grad])[0]


@tf.RegisterGradient("TuttiGroupedAllgather")
def _grouped_allgather_grad(op, *grads):
    return _own_rows(op, grads)


@tf.RegisterGradient("TuttiBroadcast")
def _broadcast_grad(op, grad):
    """Only the root's tensor reaches the outputs: it receives the average of every
    rank's output gradient, the other ranks zeros (Horovod's gradient).

    The zeros depend on the allreduce, so that every rank runs it even where only the
    zeros are fetched (a graph run by a session prunes ops nothing depends on)."""
    set_id = op.get_attr("process_set")
    reduced = allreduce_request(grad, Average, process_set_id=set_id)
    if basics.rank() != op.get_attr("root_rank"):  # root_rank is a global rank
        with tf.control_dependencies([reduced]):
            return tf.zeros_like(grad)
    return reduced


@tf.RegisterGradient("TuttiAlltoall")
def _alltoall_grad(op, grad, received_splits_grad):
    """The gradient goes back the way the data came: an alltoall with the received
    splits."""
    del received_splits_grad  # row counts have no gradient
    back, _ = alltoall_request(grad, op.outputs[1], process_set_id=op.get_attr("process_set"))
    return back, None


def _scatter_gradients(op, grads):
    """Gradient of a reducescatter, as Horovod defines it: every rank's part gradient,
    gathered, times the set size for hvd.Sum (1 for hvd.Average), times the scale
    factors. Min, Max and Product have no gradient."""
    reduce_op, prescale, postscale, set_id = _reduce_attrs(op)
    if reduce_op not in (Sum, Average):
        raise _not_differentiable("reducescatter", reduce_op, prescale, postscale)
    factor = prescale * postscale
    if reduce_op == Sum:
        factor *= set_size(set_id)
    grads = [g if g.dtype == out.dtype else tf.cast(g, out.dtype)
             for g, out in zip(grads, op.outputs)]
    gathered = grouped_allgather_request(grads, process_set_id=set_id)
    return [g * tf.cast(factor, g.dtype) if factor != 1.0 else g for g in gathered]


@tf.RegisterGradient("TuttiReducescatter")
def _reducescatter_grad(op, grad):
    return _scatter_gradients(op, [grad])[0]


@tf.RegisterGradient("TuttiGroupedReducescatter")
def _grouped_reducescatter_grad(op, *grads):
    return _scatter_gradients(op, grads)


for _name in ("TuttiSize", "TuttiProcessSetIncluded", "TuttiRank", "TuttiLocalSize",
              "TuttiLocalRank", "TuttiJoin", "TuttiBarrier"):
    tf.no_gradient(_name)
