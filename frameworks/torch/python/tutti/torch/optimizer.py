"""DistributedOptimizer: wraps a torch.optim optimizer so that gradients are averaged
across ranks before every step (Horovod's `hvd.DistributedOptimizer`).

A hook on every parameter (`register_post_accumulate_grad_hook`) starts that gradient's
asynchronous allreduce the moment backward has finished accumulating it, so communication
overlaps the rest of backward; the core fuses the requests that arrive in one negotiation
cycle. `step()` (or `synchronize()`) waits for the outstanding requests and writes the
averaged gradients back before the wrapped optimizer's own step runs.
"""

import contextlib
import warnings

import torch
from tutti.common.basics import Adasum, Average, Sum, size
from tutti.common.exceptions import InvalidArgumentError
from tutti.common.process_sets import global_process_set

from .adasum_optimizer import adasum_optimizer
from .reductions import _allreduce_async
from .compression import Compression
from .data_movement import sparse_allreduce_async
from .requests import synchronize


def _named_parameter_list(optimizer, named_parameters):
    """(name, parameter) for every parameter of the optimizer, checked the way Horovod
    checks them: names must be unique and cover every parameter."""
    if named_parameters is None:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        return [("noname.%d" % i, p) for i, p in enumerate(params)]
    named = list(named_parameters)
    if any(not isinstance(item, tuple) or len(item) != 2 for item in named):
        raise ValueError("named_parameters must be a sequence of (name, parameter) tuples, "
                         "as model.named_parameters() gives")
    seen, duplicates = set(), []
    for name, _ in named:
        if name in seen and name not in duplicates:
            duplicates.append(name)
        seen.add(name)
    if duplicates:
        raise ValueError("parameter names in named_parameters must be unique; these occur "
                         "more than once: %s" % ", ".join(map(str, duplicates)))
    named_ids = {id(p) for _, p in named}
    unnamed = [p for group in optimizer.param_groups for p in group["params"]
               if id(p) not in named_ids]
    if unnamed:
        raise ValueError("named_parameters was given, but %d of the optimizer's parameters "
                         "are not in it (shapes %s); pass model.named_parameters() of the "
                         "model the optimizer trains" % (
                             len(unnamed), ", ".join(str(tuple(p.shape)) for p in unnamed)))
    optimizer_ids = {id(p) for group in optimizer.param_groups for p in group["params"]}
    return [(name, p) for name, p in named if id(p) in optimizer_ids]


def _split_evenly(items, parts):
    """`items` in `parts` consecutive runs of (nearly) equal length."""
    parts = max(1, min(parts, len(items)))
    base, extra = divmod(len(items), parts)
    runs, start = [], 0
    for i in range(parts):
        end = start + base + (1 if i < extra else 0)
        runs.append(items[start:end])
        start = end
    return runs


class _DistributedMixin:
    """Methods mixed into a subclass of the wrapped optimizer's class (see
    DistributedOptimizer). The instance shares the wrapped optimizer's attributes, so
    param_groups, state and hooks are the same objects."""

    def _setup(self, named_parameters, compression, backward_passes_per_step, op,
               gradient_predivide_factor, num_groups, groups, sparse_as_dense, process_set):
        if backward_passes_per_step < 1:
            raise ValueError("backward_passes_per_step must be at least 1, got %r"
                             % (backward_passes_per_step,))
        if op not in (Average, Sum, Adasum):  # Adasum here: one rank, nothing to combine
            raise ValueError("DistributedOptimizer averages or sums gradients (op=Average "
                             "or Sum), not %s" % getattr(op, "name", op))
        if gradient_predivide_factor != 1.0 and op != Average:
            raise ValueError("gradient_predivide_factor needs op=Average")
        self._compression = compression or Compression.none
        self._passes = backward_passes_per_step
        self._op = op
        # Average divides by the set size after the sum; a predivide factor f moves 1/f of
        # that division before the sum (prescale) and multiplies f back after it.
        self._prescale = 1.0 / gradient_predivide_factor
        self._postscale = float(gradient_predivide_factor)
        self._sparse_as_dense = sparse_as_dense
        self._process_set = process_set or global_process_set
        named = _named_parameter_list(self, named_parameters)
        self._names = {p: "allreduce." + name for name, p in named}
        trainable = [p for _, p in named if p.requires_grad]
        self._groups = self._make_groups(trainable, num_groups, groups)
        self._group_of = {p: g for g, members in enumerate(self._groups) for p in members}
        self._remaining = {}    # parameter -> backward passes left before its allreduce
        self._ready = {}        # group index -> parameters whose gradient is final
        self._pending = []      # ([handles], finish(results)) in submission order
        self._submitted = set()
        self._synchronized = False
        self._should_synchronize = True
        # With one rank in the set there is nothing to exchange; ranks outside the set
        # train on their own gradients.
        self._communicate = self._process_set.included() and self._process_set.size() > 1
        if self._communicate:
            for p in trainable:
                # The newest DistributedOptimizer of a parameter owns it: an older one's
                # hook would submit a second request under the same name.
                previous = getattr(p, "_tutti_grad_hook", None)
                if previous is not None:
                    previous.remove()
                p._tutti_grad_hook = p.register_post_accumulate_grad_hook(self._on_grad)

    @staticmethod
    def _make_groups(params, num_groups, groups):
        if isinstance(groups, int) and not isinstance(groups, bool):
            num_groups, groups = groups, None  # Horovod also takes the count as groups=
        if groups is not None:
            listed, seen = [], set()
            for members in groups:
                members = [p for p in members if p.requires_grad and p not in seen]
                seen.update(members)
                if members:
                    listed.append(members)
            rest = [[p] for p in params if p not in seen]
            unknown = [p for members in listed for p in members
                       if not any(p is q for q in params)]
            if unknown:
                raise ValueError("groups lists %d tensors that are not parameters of the "
                                 "optimizer" % len(unknown))
            return listed + rest
        if num_groups and num_groups > 0:
            return _split_evenly(params, num_groups)
        return [[p] for p in params]

    # ---- hooks ----

    def _on_grad(self, param):
        remaining = self._remaining.get(param, self._passes) - 1
        if remaining < 0 or param in self._submitted:
            raise AssertionError(
                "a gradient was computed more than backward_passes_per_step (%d) times "
                "before optimizer.step(); raise backward_passes_per_step to accumulate "
                "more passes locally" % self._passes)
        self._remaining[param] = remaining
        if remaining > 0:
            return
        index = self._group_of[param]
        ready = self._ready.setdefault(index, [])
        ready.append(param)
        if len(ready) == len(self._groups[index]):
            self._submit(self._groups[index])

    # ---- submission ----

    def _submit(self, params):
        """Starts the allreduce of `params`' gradients (one request per dtype)."""
        dense = []
        for p in params:
            self._submitted.add(p)
            if p.grad is None:
                # This rank did not use p, but the others may have: contribute zeros.
                p.grad = torch.zeros_like(p)
            if p.grad.is_sparse:
                if self._sparse_as_dense:
                    p.grad = p.grad.to_dense()
                else:
                    self._submit_sparse(p)
                    continue
            dense.append(p)
        by_dtype = {}
        for p in dense:
            by_dtype.setdefault(p.grad.dtype, []).append(p)
        for members in by_dtype.values():
            self._submit_dense(members)

    def _submit_dense(self, params):
        compressed = [self._compression.compress(p.grad) for p in params]
        tensors = [c[0] for c in compressed]
        copies = [t is not p.grad for t, p in zip(tensors, params)]
        # The gradient itself is reduced in place unless compression made a copy. The
        # arguments were checked once in _setup: this runs for every gradient of every step.
        if len(params) == 1:
            kind, name, grouped = "allreduce", self._names[params[0]], False
        else:
            kind, grouped = "grouped_allreduce", True
            name = "grouped_" + self._names[params[0]] + ".%d" % len(params)
        handle = _allreduce_async(tensors, kind, name, int(self._op), self._prescale,
                                  self._postscale, self._process_set, True, grouped)

        def finish(results):
            results = results[0] if isinstance(results[0], list) else results
            for p, reduced, copied, (_, ctx) in zip(params, results, copies, compressed):
                if copied:
                    p.grad.copy_(self._compression.decompress(reduced, ctx))

        self._pending.append(([handle], finish))

    def _submit_sparse(self, param):
        """A sparse gradient stays sparse (as in Horovod): the allgather of its indices and
        values, summed uncoalesced (divided by the set size for Average)."""
        handle = sparse_allreduce_async(param.grad, self._names[param], self._op,
                                        self._process_set)
        factor = self._prescale * self._postscale

        def finish(results):
            (grad,) = results
            param.grad = grad * factor if factor != 1.0 else grad

        self._pending.append(([handle], finish))

    # ---- public API ----

    def synchronize(self):
        """Waits for every gradient's allreduce (starting those whose hook did not fire,
        e.g. parameters this rank did not use) and writes the results into the .grad
        tensors. step() calls it unless inside skip_synchronize()."""
        if not self._communicate:
            return
        for members in self._groups:
            missing = [p for p in members if p not in self._submitted]
            if missing:
                self._submit(missing)
        try:
            while self._pending:
                handles, finish = self._pending[0]
                results = []
                while handles:  # popped as they are waited for: _reset skips them
                    results.append(synchronize(handles[0]))
                    handles.pop(0)
                self._pending.pop(0)
                finish(results)
        finally:
            self._reset()
        self._synchronized = True

    def _reset(self):
        # Requests that were not waited for (after an error) are finished here, so
        # that the next step starts clean.
        for handles, _ in self._pending:
            for handle in handles:
                try:
                    synchronize(handle)
                except RuntimeError:
                    pass
        self._pending = []
        self._remaining.clear()
        self._ready.clear()
        self._submitted.clear()

    def set_backward_passes_per_step(self, passes):
        """Changes how many backward passes accumulate locally before the allreduce (as
        Horovod's); takes effect from the next pass."""
        if isinstance(passes, bool) or not isinstance(passes, int) or passes < 1:
            raise ValueError("backward_passes_per_step must be an integer of at least 1, "
                             "got %r" % (passes,))
        self._passes = passes
        self._remaining.clear()

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Inside this block step() does not synchronize: call synchronize() yourself
        first (e.g. to clip the averaged gradients before the step)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                # Horovod 0.28.1's words, which scripts and log filters match.
                warnings.warn("optimizer.step() called without "
                              "optimizer.skip_synchronize() context after "
                              "optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super(self._tutti_base, self).step(closure)

    def zero_grad(self, set_to_none=True):
        if self._pending or self._submitted:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() "
                                 "but before optimizer.step() or optimizer.synchronize(); "
                                 "the gradients' allreduces are still in flight")
        return super(self._tutti_base, self).zero_grad(set_to_none)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps `optimizer` (any torch.optim.Optimizer) so that step() applies gradients
    averaged (op=Average) or summed (op=Sum) over the ranks of `process_set`.

    named_parameters: model.named_parameters(); the names identify each gradient's
      allreduce across ranks (unique, covering every parameter of the optimizer).
    compression: Compression.fp16 reduces floating-point gradients as float16.
    backward_passes_per_step: gradients accumulate locally over this many backward
      passes; the allreduce starts on the last one.
    gradient_predivide_factor: divide gradients by this before the sum and by
      size / factor after it (op=Average only).
    op=Adasum: Horovod's Adasum delta optimizer on more than one rank (adasum_optimizer.py).
    num_groups / groups: reduce the gradients in this many groups of consecutive
      parameters, or in the given lists of parameters, each as one grouped allreduce.
    sparse_as_dense: turn sparse gradients dense and allreduce them; otherwise their
      indices and values are allgathered.

    The returned object is an instance of a subclass of the optimizer's class that shares
    its state; use it in place of the original optimizer.
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise InvalidArgumentError("DistributedOptimizer needs a torch.optim.Optimizer, got %s"
                                   % type(optimizer).__name__)
    base = type(optimizer)
    if isinstance(optimizer, _DistributedMixin):
        raise ValueError("the optimizer is already a DistributedOptimizer")
    if op == Adasum and size() > 1:  # Horovod's delta optimizer, see adasum_optimizer.py
        return adasum_optimizer(optimizer, _named_parameter_list(optimizer, named_parameters),
                                compression, backward_passes_per_step,
                                gradient_predivide_factor, process_set)
    cls = type(base.__name__, (_DistributedMixin, base), {"_tutti_base": _DistributedMixin})
    wrapped = cls.__new__(cls)
    wrapped.__dict__.update(optimizer.__dict__)
    wrapped._setup(named_parameters, compression, backward_passes_per_step, op,
                   gradient_predivide_factor, num_groups, groups, sparse_as_dense, process_set)
    return wrapped
