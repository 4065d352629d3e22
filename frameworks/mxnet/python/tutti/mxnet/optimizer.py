"""DistributedOptimizer: an mx.optimizer.Optimizer for the Module API whose update averages
the gradient over the ranks first."""

import itertools

import mxnet as mx
from tutti.common.process_sets import global_process_set

from . import gradients
from .compression import Compression

# Optimizers without a prefix are numbered in construction order (the same on every rank).
_unnamed_optimizers = itertools.count()

# The wrapper's own attributes; every other attribute is the wrapped optimizer's.
_OWN = ("_optimizer", "_reducer")


class DistributedOptimizer(mx.optimizer.Optimizer):
    """Wraps an optimizer so that each update first averages its gradients over the ranks
    of `process_set` (in place, asynchronously on MXNet's engine), then runs the wrapped
    update, which the engine orders after the reduction.

        opt = mx.optimizer.SGD(learning_rate=0.1, rescale_grad=1.0 / batch_size)
        module.init_optimizer(optimizer=hvd.DistributedOptimizer(opt))
        # or module.fit(..., optimizer=hvd.DistributedOptimizer(opt))

    The Module must update locally (kvstore None, or 'local' with one device), which is
    what it does with one context per process. Gradients are matched across ranks by the
    update's parameter index. Reading or setting any optimizer attribute (learning rate,
    rescale_grad, idx2name, ...) reaches the wrapped optimizer.

    gradient_predivide_factor, num_groups, compression, process_set: as for
    DistributedTrainer (num_groups splits the parameters of each aggregated update call).
    prefix: prepended to the request names; without one, optimizers are numbered in the
    order they are created.
    """

    # Horovod's positional order first (optimizer, gradient_predivide_factor, num_groups,
    # process_set), then tutti's additions.
    def __init__(self, optimizer, gradient_predivide_factor=1.0, num_groups=0,
                 process_set=global_process_set, prefix=None, compression=Compression.none):
        if not isinstance(optimizer, mx.optimizer.Optimizer):
            raise TypeError("DistributedOptimizer wraps an mx.optimizer.Optimizer, got %s"
                            % type(optimizer).__name__)
        if isinstance(optimizer, DistributedOptimizer):
            raise TypeError("the optimizer is already a DistributedOptimizer")
        reducer = gradients.GradientReducer(
            "DistributedOptimizer", compression, gradient_predivide_factor, num_groups,
            process_set, gradients.check_prefix(prefix))
        if prefix is None:  # numbered only once the arguments are accepted
            reducer.prefix = "optimizer%d." % next(_unnamed_optimizers)
        # The base class's __init__ is not run: its state lives in the wrapped optimizer.
        object.__setattr__(self, "_optimizer", optimizer)
        object.__setattr__(self, "_reducer", reducer)

    def __getattr__(self, name):  # only called for names not found on the wrapper
        if name in _OWN:  # not set yet (e.g. while unpickling)
            raise AttributeError(name)
        return getattr(self._optimizer, name)

    def __setattr__(self, name, value):
        if name in _OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self._optimizer, name, value)

    @property
    def learning_rate(self):
        return self._optimizer.learning_rate

    def _reduce(self, index, grad):
        if isinstance(index, (list, tuple)):
            self._reducer.reduce(list(zip(index, grad)))
        else:
            self._reducer.reduce([(index, grad)])

    def create_state(self, index, weight):
        return self._optimizer.create_state(index, weight)

    def create_state_multi_precision(self, index, weight):
        return self._optimizer.create_state_multi_precision(index, weight)

    def update(self, index, weight, grad, state):
        self._reduce(index, grad)
        self._optimizer.update(index, weight, grad, state)

    def update_multi_precision(self, index, weight, grad, state):
        self._reduce(index, grad)
        self._optimizer.update_multi_precision(index, weight, grad, state)

    def set_learning_rate(self, lr):
        self._optimizer.set_learning_rate(lr)

    def set_lr_scale(self, args_lrscale):
        self._optimizer.set_lr_scale(args_lrscale)

    def set_lr_mult(self, args_lr_mult):
        self._optimizer.set_lr_mult(args_lr_mult)

    def set_wd_mult(self, args_wd_mult):
        self._optimizer.set_wd_mult(args_wd_mult)

    def _set_current_context(self, device_id):
        self._optimizer._set_current_context(device_id)

    def __getstate__(self):
        return {"_optimizer": self._optimizer, "_reducer": self._reducer}

    def __setstate__(self, state):
        for name in _OWN:
            object.__setattr__(self, name, state[name])
