"""Averaging gradients over a process set, shared by DistributedTrainer (Gluon) and
DistributedOptimizer (Module): compression, predivision, grouping, names and priorities.

Nothing here waits: every reduction is an engine operation, and whatever reads a gradient
afterwards (the optimizer update) is ordered after it by MXNet's engine.
"""

import numbers
from collections import OrderedDict

from tutti.common import process_sets
from tutti.common.basics import ReduceOp

from . import requests
from .reductions import allreduce_, grouped_allreduce_


def check_positive(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError("%s must be a positive number, got %r" % (what, value))
    return float(value)


def check_prefix(prefix):
    """`prefix` (None or a string), or "" for None; TypeError otherwise."""
    if prefix is not None and not isinstance(prefix, str):
        raise TypeError("prefix must be a string, got %r" % (prefix,))
    return prefix or ""


def split_evenly(items, parts):
    """`items` cut into at most `parts` runs of consecutive items whose lengths differ by at
    most one (empty runs are left out)."""
    quotient, remainder = divmod(len(items), parts)
    runs, start = [], 0
    for part in range(parts):
        end = start + quotient + (1 if part < remainder else 0)
        if end > start:
            runs.append(items[start:end])
        start = end
    return runs


class GradientReducer:
    """Averages lists of (index, gradient) over a process set, in place."""

    def __init__(self, owner, compression, gradient_predivide_factor, num_groups, process_set,
                 prefix):
        if not (hasattr(compression, "compress") and hasattr(compression, "decompress")):
            raise TypeError("compression must be a compressor such as hvd.Compression.none or "
                            "hvd.Compression.fp16, got %r" % (compression,))
        if isinstance(num_groups, bool) or not isinstance(num_groups, numbers.Integral) or (
                num_groups < 0):
            raise ValueError("num_groups must be a non-negative integer, got %r" % (num_groups,))
        self.owner = owner  # the class using it, for messages
        self.compression = compression
        self.predivide = check_positive(gradient_predivide_factor, "gradient_predivide_factor")
        self.num_groups = int(num_groups)
        self.process_set = process_set
        self.prefix = prefix

    def reduce(self, entries):
        """Pushes the reductions of `entries`, a list of (index, NDArray) with indices that
        name the same parameter on every rank, and returns at once."""
        if not entries:
            return
        requests.check_initialized(self.owner)
        set_id = process_sets.request_id(self.process_set)  # refuses non-members
        size = process_sets.set_size(set_id)
        if size == 1:
            return
        # Horovod's split of the average: 1/f before the sum, f/size after it.
        scales = {"op": ReduceOp.Sum, "prescale_factor": 1.0 / self.predivide,
                  "postscale_factor": self.predivide / size, "process_set": self.process_set}
        sent = []
        for index, grad in entries:
            tensor, context = self.compression.compress(grad)
            sent.append((index, grad, tensor, context))
        # Earlier parameters first: the next forward pass needs them first.
        if self.num_groups == 0:
            for position, (index, _, tensor, _) in enumerate(sent):
                allreduce_(tensor, name="%sgrad.%s" % (self.prefix, index), priority=-position,
                           **scales)
        else:
            for number, run in enumerate(split_evenly(sent, self.num_groups)):
                by_dtype = OrderedDict()
                for entry in run:
                    by_dtype.setdefault(requests.dtype_name(entry[2]), []).append(entry)
                for dtype, group in by_dtype.items():
                    name = "%sgrads.%s-%s.%s" % (self.prefix, group[0][0], group[-1][0], dtype)
                    grouped_allreduce_([entry[2] for entry in group], name=name,
                                       priority=-number, **scales)
        for _, grad, tensor, context in sent:
            if tensor is not grad:
                self.compression.decompress(tensor, context).copyto(grad)
