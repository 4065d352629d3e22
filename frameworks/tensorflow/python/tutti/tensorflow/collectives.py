"""The public collectives of tutti.tensorflow, with Horovod's signatures."""


import tensorflow as tf
from tutti.common.basics import resolve_reduce_op

from .compression import Compression
from .mpi_ops import _allreduce


def allreduce(tensor, average=None, device_dense="", device_sparse="", compression=None,
              op=None, prescale_factor=1.0, postscale_factor=1.0, name=None):
    """Reduces `tensor` over all ranks and returns the result, the same on every rank.

    tensor: a tf.Tensor or tf.Variable (or anything tf.convert_to_tensor accepts) with the
        same dtype and shape on every rank; tf.IndexedSlices are densified first.
    op: hvd.Average (default), hvd.Sum, hvd.Min, hvd.Max or hvd.Product.
    average: deprecated; True means hvd.Average, False hvd.Sum.
    device_dense, device_sparse: TensorFlow devices for dense and sparse inputs.
    compression: hvd.Compression.none (default) or hvd.Compression.fp16.
    prescale_factor, postscale_factor: multiply the input before and the result after the
        reduction.
    name: names the request across ranks; must be unique among requests in flight.
        Without it a name is generated that is identical on every rank, provided every
        rank issues the same collectives in the same order.

    Differentiable for hvd.Sum and hvd.Average (and unscaled hvd.Min / hvd.Max).
    Failures reported by the core (e.g. ranks disagreeing on dtype or shape) raise
    tf.errors.FailedPreconditionError with the core's message.
    """
    op = resolve_reduce_op(op, average)
    compression = compression or Compression.none
    if isinstance(tensor, tf.IndexedSlices):
        with tf.device(device_sparse):
            tensor = tf.convert_to_tensor(tensor)
    with tf.device(device_dense):
        compressed, context = compression.compress(tf.convert_to_tensor(tensor))
        reduced = _allreduce(compressed, op, prescale_factor, postscale_factor, name)
        return compression.decompress(reduced, context)
