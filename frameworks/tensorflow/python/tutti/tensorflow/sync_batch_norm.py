"""SyncBatchNormalization: Keras batch normalization whose batch statistics are averaged
over every rank while training (Horovod's layer, for Keras 3)."""

import keras
import tensorflow as tf
from tutti.common import basics
from tutti.common.basics import Sum

from .reductions import allreduce


class SyncBatchNormalization(keras.layers.BatchNormalization):
    """BatchNormalization whose mean and variance, while training, are those of the
    global batch (every rank's batch together), as if one process saw it all; inference
    uses the moving statistics as usual. Every rank must call it the same number of
    times. fused=True is refused as in Horovod (Keras 3 has no fused kernel anyway)."""

    def __init__(self, fused=False, **kwargs):
        if fused in (True, None):
            raise ValueError("SyncBatchNormalization does not support fused=True.")
        if not kwargs.get("name"):
            kwargs["name"] = "sync_batch_normalization"
        super().__init__(**kwargs)

    def _moments(self, inputs, mask):
        mean, variance = super()._moments(inputs, mask)
        size = basics.size()
        if size == 1:
            return mean, variance
        # Average E[x] and E[x^2] over the ranks (equal batch sizes, as in Horovod), then
        # Var[x] = E[x^2] - E[x]^2.
        stacked = tf.stack([mean, variance + tf.square(mean)])
        total = allreduce(stacked, op=Sum) / tf.cast(size, stacked.dtype)
        group_mean, group_mean_of_square = tf.unstack(total)
        return group_mean, group_mean_of_square - tf.square(group_mean)
