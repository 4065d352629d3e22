"""DistributedGradientTape and PartialDistributedGradientTape: a tf.GradientTape whose
gradient() returns gradients averaged over the ranks."""

import tensorflow as tf
from tutti.common.basics import Average
from tutti.common.process_sets import global_process_set

from .compression import Compression
from .gradients import GradientReducer


class _ReducingTape:
    """Mixed into the class of the tape being wrapped: gradient() reduces the tape's
    gradients over the ranks; everything else (watch, stop_recording, jacobian, ...) is the
    tape's own."""

    def register_local_source(self, source):
        """Keeps the gradient of `source` (a variable) local: it is not reduced."""
        self._tutti_reducer.add_local_variable(source)

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=tf.UnconnectedGradients.NONE, use_generic_names=False):
        """The tape's gradients of `target` with respect to `sources`, reduced over the
        ranks (same nested structure as `sources`). use_generic_names: accepted for
        Horovod compatibility (requests are always named alike on every rank)."""
        del use_generic_names
        gradients = super().gradient(target, sources, output_gradients, unconnected_gradients)
        flat_sources = tf.nest.flatten(sources)
        flat = self._tutti_reducer.reduce(tf.nest.flatten(gradients), flat_sources)
        return tf.nest.pack_sequence_as(gradients, flat)


_TAPE_CLASSES = {}


def _reducing_tape(gradtape, reducer):
    """A new tape of `gradtape`'s own class (so isinstance checks hold, as in Horovod)
    that shares its recording and reduces in gradient()."""
    if not isinstance(gradtape, tf.GradientTape):
        raise TypeError("DistributedGradientTape wraps a tf.GradientTape, got %s"
                        % type(gradtape).__name__)
    base = type(gradtape)
    if base not in _TAPE_CLASSES:
        _TAPE_CLASSES[base] = type(base.__name__, (_ReducingTape, base), {})
    tape = _TAPE_CLASSES[base](persistent=gradtape._persistent,
                               watch_accessed_variables=gradtape._watch_accessed_variables)
    # TensorFlow keeps what was recorded in `_tape`: share it (Horovod does the same).
    tape._tape = gradtape._tape
    tape._watched_variables = gradtape._watched_variables
    tape._tutti_reducer = reducer
    return tape


def DistributedGradientTape(gradtape, device_dense="", device_sparse="",
                            compression=Compression.none, sparse_as_dense=False, op=Average,
                            gradient_predivide_factor=1.0, num_groups=0, groups=None,
                            process_set=global_process_set, scale_local_gradients=True):
    """A tape whose gradient() averages the gradients over the ranks of `process_set`
    (op=hvd.Sum sums them).

        with tf.GradientTape() as tape:
            loss = ...
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)

    compression: hvd.Compression.fp16 sends floating-point gradients as float16.
    sparse_as_dense: densify tf.IndexedSlices gradients (else their rows are gathered).
    gradient_predivide_factor: split the averaging into a division before the sum and
        one after it.
    num_groups / groups: how gradients are bundled into requests (default: one request
        per dtype). Gradients that are None stay None.
    """
    reducer = GradientReducer(device_dense, device_sparse, compression, sparse_as_dense, op,
                              gradient_predivide_factor, num_groups, groups, process_set,
                              scale_local_gradients=scale_local_gradients)
    return _reducing_tape(gradtape, reducer)


def PartialDistributedGradientTape(gradtape, device_dense="", device_sparse="",
                                   compression=Compression.none, sparse_as_dense=False,
                                   op=Average, gradient_predivide_factor=1.0, num_groups=0,
                                   groups=None, process_set=global_process_set,
                                   local_layers=None, scale_local_gradients=True):
    """DistributedGradientTape whose `local_layers` (a Keras layer or a list of them)
    keep their gradients local: their variables' gradients are not reduced (with
    scale_local_gradients, the default, they are divided by the set size whatever the
    op, as in Horovod). More variables can be made local with
    tape.register_local_source(v).
    """
    import keras  # only local layers need Keras

    if local_layers is None:
        local_layers = []
    elif isinstance(local_layers, keras.layers.Layer):
        local_layers = [local_layers]
    else:
        local_layers = list(local_layers)
        if not all(isinstance(layer, keras.layers.Layer) for layer in local_layers):
            raise ValueError("All local layers must be of tf.keras.layers.Layer type.")
    local_variables = [v for layer in local_layers for v in layer.trainable_weights]
    reducer = GradientReducer(device_dense, device_sparse, compression, sparse_as_dense, op,
                              gradient_predivide_factor, num_groups, groups, process_set,
                              local_variables, scale_local_gradients)
    return _reducing_tape(gradtape, reducer)
