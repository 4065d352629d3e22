"""DistributedTrainer: a Gluon Trainer that averages gradients over the ranks of a process
set, with the reductions pushed asynchronously onto MXNet's engine."""

import itertools
import warnings

import mxnet as mx
from tutti.common.process_sets import global_process_set

from . import gradients
from .compression import Compression
from .optimizer import DistributedOptimizer

# Trainers without a prefix are numbered in construction order, which is the same on every
# rank, so the gradient requests of two trainers never share a name.
_unnamed_trainers = itertools.count()


class DistributedTrainer(mx.gluon.Trainer):
    """A gluon.Trainer whose gradients are averaged over the ranks of `process_set` before
    each update.

    Use it in place of gluon.Trainer; every rank then applies the same update, so models
    that start equal (see broadcast_parameters) stay equal. `trainer.step(batch_size)`
    takes the per-rank batch size, as with a local Trainer.

    step() pushes one reduction per gradient (or, with num_groups > 0, one grouped
    reduction per group of parameters) onto MXNet's engine and returns without waiting:
    each reduction starts as soon as backward has written its gradient, the core fuses
    the ones that are ready in the same cycle, and the optimizer update of a parameter
    waits only for its own gradient (or its group). Earlier parameters get higher engine
    priority, since the next forward pass needs them first.

    compression: Compression.none or Compression.fp16 (gradients travel as float16).
    gradient_predivide_factor: gradients are multiplied by 1/f before the sum and by
        f/size after it (Horovod's definition); the average is unchanged, the range of
        the partial sums is not.
    prefix: prepended to the request names. Without one, trainers are numbered in the
        order they are created, which must then be the same on every rank.
    num_groups: 0 reduces each gradient with its own request; n > 0 splits the
        parameters into n groups of consecutive parameters, one grouped request each
        (and per dtype).
    process_set: the ranks that average their gradients; every member must train.
    """

    def __init__(self, params, optimizer, optimizer_params=None, compression=Compression.none,
                 gradient_predivide_factor=1.0, prefix=None, num_groups=0,
                 process_set=global_process_set):
        if isinstance(optimizer, DistributedOptimizer):
            warnings.warn("DistributedTrainer reduces the gradients itself and takes a plain "
                          "optimizer; using the one inside the DistributedOptimizer")
            optimizer = optimizer._optimizer
        self._reducer = gradients.GradientReducer(
            "DistributedTrainer", compression, gradient_predivide_factor, num_groups,
            process_set, gradients.check_prefix(prefix))
        # No kvstore: the gradients are reduced by tutti, and each rank updates locally.
        super().__init__(params, optimizer, optimizer_params=optimizer_params, kvstore=None)
        if len(self._contexts) > 1:
            raise ValueError(
                "DistributedTrainer expects one context per process (one rank per device), "
                "got %s" % (self._contexts,)
            )
        if prefix is None:  # numbered only once constructed, so failures never skip a number
            self._reducer.prefix = "trainer%d." % next(_unnamed_trainers)

    def _allreduce_grads(self):
        # Parameters are matched across ranks by their index, which every rank builds in
        # the same order; Gluon's names may differ (they count blocks per process).
        entries = [(index, param.list_grad()[0]) for index, param in enumerate(self._params)
                   if param.grad_req != "null"]
        self._reducer.reduce(entries)

