"""TensorFlow ops of tutti: allreduce and the topology ops, with their gradients.

The module keeps Horovod's name (horovod.tensorflow.mpi_ops) so that scripts importing
from it port by changing the package name; the ops run over MPI or Gloo alike.
"""

import tensorflow as tf
from tutti.common.basics import ReduceOp

from . import naming
from .native import ops as _ops

_REDUCE_OP_NAMES = ", ".join("hvd.%s" % op.name for op in ReduceOp)


def _reduce_op_code(op):
    try:
        return int(ReduceOp(op))
    except ValueError:
        raise ValueError("op must be one of %s, not %r" % (_REDUCE_OP_NAMES, op)) from None


def _allreduce(tensor, op=ReduceOp.Average, prescale_factor=1.0, postscale_factor=1.0,
               name=None):
    """Reduces `tensor` over all ranks with the core's `op` (no compression, dense only).

    The request name is derived from `name` the same way on every rank (see naming).
    """
    result = _ops.tutti_allreduce(
        tensor,
        reduce_op=_reduce_op_code(op),
        prescale_factor=float(prescale_factor),
        postscale_factor=float(postscale_factor),
        tensor_name=naming.request_name(name, "allreduce"),
        name=naming.op_name(name, "TuttiAllreduce"),
    )
    _run_independently(result)
    return result


def _run_independently(tensor):
    """Lets a collective inside tf.function run in parallel with the other stateful ops.

    The ops are stateful (never constant-folded), and tf.function chains stateful ops in
    program order by default. Collectives must not be chained: the core fuses requests
    that are pending at the same time, and ranks may reach them in different orders.
    They still always run before the function returns.
    """
    if tf.executing_eagerly():
        return
    manager = getattr(tensor.graph, "experimental_acd_manager", None)
    if manager is not None:
        manager.run_independently(tensor.op)


@tf.RegisterGradient("TuttiAllreduce")
def _allreduce_grad(op, grad):
    """Gradient of an allreduce whose output feeds every rank's loss.

    Sum and Average: the total loss is the sum of the ranks' losses, so each input
    receives the same reduction (same op and scale factors) of the output gradients.
    Min and Max (unscaled): the summed output gradient flows to the inputs that were
    selected, i.e. equal the result; ties each receive it in full.
    """
    reduce_op = ReduceOp(op.get_attr("reduce_op"))
    prescale = op.get_attr("prescale_factor")
    postscale = op.get_attr("postscale_factor")
    if reduce_op in (ReduceOp.Sum, ReduceOp.Average):
        return _allreduce(grad, reduce_op, prescale, postscale)
    if reduce_op in (ReduceOp.Min, ReduceOp.Max) and prescale == 1.0 and postscale == 1.0:
        summed = _allreduce(grad, ReduceOp.Sum)
        selected = tf.cast(tf.equal(op.inputs[0], op.outputs[0]), summed.dtype)
        return summed * selected
    raise NotImplementedError(
        "tutti.tensorflow: the gradient of allreduce is defined for hvd.Sum and hvd.Average "
        "(and unscaled hvd.Min / hvd.Max), not for %s with prescale_factor=%s and "
        "postscale_factor=%s" % (reduce_op.name, prescale, postscale)
    )


def size_op(name=None):
    """The number of ranks, as an int32 scalar computed when the op runs."""
    return _ops.tutti_size(name=name)


def rank_op(name=None):
    """This process's rank, as an int32 scalar computed when the op runs."""
    return _ops.tutti_rank(name=name)


def local_size_op(name=None):
    """The number of ranks on this host, as an int32 scalar computed when the op runs."""
    return _ops.tutti_local_size(name=name)


def local_rank_op(name=None):
    """This process's rank on its host, as an int32 scalar computed when the op runs."""
    return _ops.tutti_local_rank(name=name)


for _name in ("TuttiSize", "TuttiRank", "TuttiLocalSize", "TuttiLocalRank"):
    tf.no_gradient(_name)
