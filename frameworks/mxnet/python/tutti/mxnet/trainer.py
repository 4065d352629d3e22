"""DistributedTrainer: a Gluon Trainer that averages gradients over all ranks."""

import mxnet as mx
from tutti.common import basics
from tutti.common.basics import ReduceOp

from .reductions import allreduce_


class DistributedTrainer(mx.gluon.Trainer):
    """A gluon.Trainer whose gradients are averaged over all ranks before each update.

    Use it in place of gluon.Trainer; every rank then applies the same update, so models
    that start equal (see broadcast_parameters) stay equal. `trainer.step(batch_size)`
    takes the per-rank batch size, as with a local Trainer.

    gradient_predivide_factor: gradients are divided by it before the sum and multiplied
    by it after, which keeps large half-precision sums in range; the average is unchanged.
    prefix: prepended to the names of the gradient reductions; needed only when several
    DistributedTrainers reduce at the same time.
    """

    def __init__(
        self, params, optimizer, optimizer_params=None, gradient_predivide_factor=1.0, prefix=None
    ):
        if gradient_predivide_factor <= 0:
            raise ValueError(
                "gradient_predivide_factor must be positive, got %r" % (gradient_predivide_factor,)
            )
        # No kvstore: the gradients are reduced by tutti, and each rank updates locally.
        super().__init__(params, optimizer, optimizer_params=optimizer_params, kvstore=None)
        if len(self._contexts) > 1:
            raise ValueError(
                "DistributedTrainer expects one context per process (one rank per device), "
                "got %s" % (self._contexts,)
            )
        self._gradient_predivide_factor = float(gradient_predivide_factor)
        self._prefix = prefix or ""

    def _allreduce_grads(self):
        if basics.size() == 1:
            return
        # Parameters are matched across ranks by their index, which every rank builds in
        # the same order; Gluon's names may differ (they count blocks per process).
        for index, param in enumerate(self._params):
            if param.grad_req == "null":
                continue
            allreduce_(
                param.list_grad()[0],
                op=ReduceOp.Average,
                name="%sgradient.%d" % (self._prefix, index),
                priority=-index,
                prescale_factor=1.0 / self._gradient_predivide_factor,
                postscale_factor=self._gradient_predivide_factor,
            )
