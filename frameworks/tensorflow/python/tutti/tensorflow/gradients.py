"""Averaging of gradients across ranks, shared by DistributedGradientTape and the Keras
DistributedOptimizer."""

import tensorflow as tf
from tutti.common.basics import Adasum, Average, Sum, resolve_reduce_op
from tutti.common.process_sets import global_process_set

from .reductions import grouped_allreduce
from .compression import Compression


class GradientReducer:
    """Reduces a list of gradients (tensors, tf.IndexedSlices or None) over the ranks of
    a process set with Horovod's options.

    op: hvd.Average (default), hvd.Sum or hvd.Adasum (Adasum of the gradients).
    gradient_predivide_factor: with Average, divide by this factor before the sum and by
        size / factor after it (same result, different rounding and overflow behaviour).
    sparse_as_dense: densify tf.IndexedSlices first (else they are allgathered).
    num_groups: split the gradients into this many requests (0: one per dtype).
    groups: lists of variables reduced together (needs `variables` when reducing), or a
        number of requests as num_groups (Horovod's newer spelling).
    local_variables: variables whose gradients stay local (model-parallel parts, e.g.
        PartialDistributedGradientTape's local layers); with scale_local_gradients they
        are divided by the set size whatever the op, as Horovod does.
    A rank outside the process set keeps its gradients unreduced, as in Horovod.
    """

    def __init__(self, device_dense="", device_sparse="", compression=Compression.none,
                 sparse_as_dense=False, op=Average, gradient_predivide_factor=1.0,
                 num_groups=0, groups=None, process_set=global_process_set,
                 local_variables=(), scale_local_gradients=True):
        self.op = resolve_reduce_op(op)
        if self.op not in (Average, Sum, Adasum):  # Adasum: of the gradients, as Horovod
            raise ValueError("gradients are reduced with hvd.Average, hvd.Sum or hvd.Adasum, not %s"
                             % self.op.name)
        if gradient_predivide_factor != 1.0 and self.op != Average:
            raise ValueError("gradient_predivide_factor needs op=hvd.Average")
        if isinstance(groups, int) and not isinstance(groups, bool):
            if groups <= 0:
                raise ValueError("groups should be a non-negative integer or a list of "
                                 "lists of variables, got %r" % (groups,))
            num_groups, groups = (num_groups or groups), None
        if num_groups and groups is not None:
            raise ValueError("pass either num_groups or groups, not both")
        if num_groups < 0:
            raise ValueError("num_groups must be >= 0, got %r" % (num_groups,))
        self.device_dense = device_dense
        self.device_sparse = device_sparse
        self.compression = compression or Compression.none
        self.sparse_as_dense = sparse_as_dense
        self.predivide = float(gradient_predivide_factor)
        self.num_groups = int(num_groups)
        self.groups = [list(g) for g in groups] if groups is not None else None
        self.process_set = process_set or global_process_set
        # Identities, as Keras does: Keras 3 variables are not hashable tensors.
        self.local_refs = {id(v) for v in local_variables}
        self.scale_local_gradients = scale_local_gradients

    def add_local_variable(self, variable):
        self.local_refs.add(id(variable))

    def _group_of(self, indices, variables):
        """Request groups: lists of gradient indices."""
        if self.groups is not None:
            if variables is None:
                raise ValueError("groups= needs the variables of the gradients")
            where = {id(v): i for i, v in enumerate(variables)}
            chosen = [[where[id(v)] for v in group if id(v) in where]
                      for group in self.groups]
            grouped = {i for group in chosen for i in group}
            rest = [i for i in indices if i not in grouped]
            return [[i for i in g if i in indices] for g in chosen] + ([rest] if rest else [])
        if self.num_groups:
            count = min(self.num_groups, len(indices))
            return [indices[k::count] for k in range(count)]
        return [indices]

    def reduce(self, gradients, variables=None):
        """The reduced gradients, in the order given (None stays None)."""
        gradients = list(gradients)
        results = list(gradients)
        shared = []
        for i, grad in enumerate(gradients):
            if grad is None:
                continue
            if variables is not None and id(variables[i]) in self.local_refs:
                if self.scale_local_gradients:
                    results[i] = _scale(grad, 1.0 / self.process_set.size())
                continue
            if self.sparse_as_dense and isinstance(grad, tf.IndexedSlices):
                with tf.device(self.device_sparse):
                    gradients[i] = tf.convert_to_tensor(grad)
            shared.append(i)
        if not self.process_set.included():
            return [g if i in shared else results[i] for i, g in enumerate(gradients)]
        prescale, postscale = 1.0, 1.0
        if self.predivide != 1.0:
            prescale, postscale = 1.0 / self.predivide, self.predivide
        for group in self._group_of(shared, variables):
            if not group:
                continue
            reduced = grouped_allreduce(
                [gradients[i] for i in group], device_dense=self.device_dense,
                device_sparse=self.device_sparse, compression=self.compression, op=self.op,
                prescale_factor=prescale, postscale_factor=postscale,
                process_set=self.process_set)
            for i, value in zip(group, reduced):
                results[i] = value
        return results


def _scale(grad, factor):
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values * tf.cast(factor, grad.values.dtype), grad.indices,
                                grad.dense_shape)
    return tf.convert_to_tensor(grad) * tf.cast(factor, grad.dtype)
