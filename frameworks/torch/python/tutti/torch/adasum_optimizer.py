"""DistributedOptimizer(op=hvd.Adasum): Horovod's delta optimizer.

Adasum combines whole updates, not gradients: each rank applies its own optimizer to a
parameter as soon as backward has produced the parameter's (accumulated) gradient, and the
parameter's change (the delta) is Adasum-allreduced across ranks while backward goes on.
step() waits for every delta and sets each parameter to its value before the local step
plus the combined delta. Semantics as Horovod 0.28.1's torch Adasum optimizer:
- the local step of parameter p runs the wrapped optimizer with only p in its groups, on
  the last of backward_passes_per_step backward passes (gradients accumulate before it);
- step() makes the local step and the allreduce of every parameter whose hook has not
  fired (unused parameters, or fewer backward passes than backward_passes_per_step);
- synchronize() does nothing and skip_synchronize() is refused;
- the global process set only (NotImplementedError otherwise), and a number of ranks that
  is a power of two (NotImplementedError, raised here at construction rather than at the
  first backward pass).
Unlike Horovod, which builds a fresh optimizer from the wrapped one's param_groups, the
returned optimizer shares the wrapped optimizer's state, as DistributedOptimizer does.
"""

import contextlib

import torch
from tutti.common import adasum
from tutti.common.basics import Adasum
from tutti.common.process_sets import global_process_set

from .reductions import _allreduce_async
from .compression import Compression
from .requests import synchronize


class _AdasumMixin:
    """Methods mixed into a subclass of the wrapped optimizer's class; the instance shares
    the wrapped optimizer's attributes (param_groups, state)."""

    def _setup(self, named, compression, backward_passes_per_step):
        if backward_passes_per_step < 1:
            raise ValueError("backward_passes_per_step must be at least 1, got %r"
                             % (backward_passes_per_step,))
        self._compression = compression or Compression.none
        self.backward_passes_per_step = backward_passes_per_step
        self._names = {p: "allreduce." + name for name, p in named}
        self._trainable = [p for _, p in named if p.requires_grad]
        self._delay = {p: backward_passes_per_step for p in self._trainable}
        # The parameter's value before its local step, plus the combined delta at step().
        self._starts = {p: torch.zeros_like(p, requires_grad=False) for p in self._trainable}
        self._handles = {}  # parameter -> (handle or None, compression context)
        for p in self._trainable:
            previous = getattr(p, "_tutti_grad_hook", None)
            if previous is not None:
                previous.remove()
            p._tutti_grad_hook = p.register_post_accumulate_grad_hook(self._on_grad)

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._delay:
            self._delay[p] = passes

    def _on_grad(self, param):
        if param in self._handles and self._handles[param][0] is not None \
                and self._delay[param] <= 0:
            raise AssertionError(
                "Gradients were computed more than backward_passes_per_step times before "
                "call to step(). Increase backward_passes_per_step to accumulate gradients "
                "locally.")
        self._delay[param] -= 1
        handle = None, None
        if self._delay[param] == 0:
            handle = self._step_and_submit(param)
        self._handles[param] = handle

    def _step_and_submit(self, param):
        """Applies the local step to `param` alone, turns it into its delta and starts the
        delta's Adasum allreduce; returns (handle, compression context)."""
        start = self._starts[param]
        start.copy_(param.data)
        stashed = [group["params"] for group in self.param_groups]
        try:
            for group in self.param_groups:
                group["params"] = [param] if any(param is q for q in group["params"]) else []
            super(_AdasumMixin, self).step()
        finally:
            for group, params in zip(self.param_groups, stashed):
                group["params"] = params
        delta = param.data
        delta.sub_(start)
        compressed, ctx = self._compression.compress(delta)
        handle = _allreduce_async([compressed], "allreduce", self._names[param], Adasum, 1.0,
                                  1.0, global_process_set, True, False)
        return handle, ctx

    def synchronize(self):
        """Does nothing: the deltas are combined in step()."""

    @contextlib.contextmanager
    def skip_synchronize(self):
        raise AssertionError("Skipping synchronization is not supported when using Adasum "
                             "optimizer.")
        yield  # pragma: no cover  (makes this a generator for contextmanager)

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for p in self._trainable:
            if p not in self._handles:
                self._handles[p] = self._step_and_submit(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:  # fewer backward passes than backward_passes_per_step
                handle, ctx = self._step_and_submit(p)
            delta = self._compression.decompress(synchronize(handle), ctx)
            start = self._starts[p]
            start.add_(delta.to(start.dtype))
            p.data.copy_(start)
            self._delay[p] = self.backward_passes_per_step
        self._handles.clear()
        return loss

    def zero_grad(self, set_to_none=True):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() "
                                 "but before optimizer.step() or optimizer.synchronize(). "
                                 "This is prohibited as it can cause a race condition.")
        return super(_AdasumMixin, self).zero_grad(set_to_none)


def adasum_optimizer(optimizer, named, compression, backward_passes_per_step,
                     gradient_predivide_factor, process_set):
    """The DistributedOptimizer for op=Adasum on more than one rank (see the module doc).
    `named` is the checked (name, parameter) list of the optimizer's parameters."""
    if isinstance(optimizer, _AdasumMixin):
        raise ValueError("the optimizer is already a DistributedOptimizer")
    if gradient_predivide_factor != 1.0:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if process_set is not None and process_set is not global_process_set:
        raise NotImplementedError("Adasum does not support non-global process sets yet.")
    adasum.check_ranks(Adasum)
    base = type(optimizer)
    cls = type(base.__name__, (_AdasumMixin, base), {})
    wrapped = cls.__new__(cls)
    wrapped.__dict__.update(optimizer.__dict__)
    wrapped._setup(named, compression, backward_passes_per_step)
    return wrapped
