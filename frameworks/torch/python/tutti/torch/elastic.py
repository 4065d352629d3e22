"""Elastic training for PyTorch: `hvd.elastic.run`, `TorchState`, `ElasticSampler`.

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for batch_idx, (x, y) in enumerate(loader):     # loader uses state.sampler
                ...one training step...
                state.sampler.record_batch(batch_idx, batch_size)
                if batch_idx % commit_every == 0:
                    state.commit()
            state.sampler.set_epoch(state.epoch + 1)
            state.commit()

    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0)
    train(state)

See docs/elastic.md for what is committed when and what each failure costs.
"""

import copy
import math

import torch

from tutti.common import basics
from tutti.common import elastic as _elastic
from tutti.common.elastic import ObjectState, State  # noqa: F401  (Horovod's names)

from .functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters


def run(func):
    """Decorator: runs `func(state, ...)` to completion across failures and host changes
    (see tutti.common.elastic.run_fn)."""
    return _elastic.run_fn(func, _elastic.reset)


class ElasticSampler(torch.utils.data.Sampler):
    """Shards a dataset over the current workers and resumes mid-epoch after a change.

    Each epoch is one permutation (seeded by `seed + epoch` when `shuffle`). The samples of
    the epoch not processed yet are dealt out round-robin over the workers, so after k
    recorded batches of size B every worker together has consumed exactly the first
    k * B * size of them, whatever the size was. `record_batch` advances that count;
    commit() saves it; after a failure or a change of size the remaining samples are dealt
    out again over the new workers: none is repeated, none skipped. When the remaining
    samples do not divide evenly, the epoch's last step repeats a few so that every worker
    makes the same number of steps (as torch's DistributedSampler does).
    """

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch `epoch` from its first sample."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Records that every worker finished batch `batch_idx` (counted from the start of
        the current iterator) of `batch_size` samples."""
        done = self._segment_start + (batch_idx + 1) * batch_size * self.num_replicas
        self.processed_num = min(done, len(self.dataset))

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def reset(self):
        """Deals the remaining samples out over the current workers (call after a change)."""
        self.num_replicas = basics.size() if basics.is_initialized() else 1
        self.rank = basics.rank() if basics.is_initialized() else 0
        if self.shuffle:
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.epoch)
            order = torch.randperm(len(self.dataset), generator=generator).tolist()
        else:
            order = list(range(len(self.dataset)))
        self._segment_start = self.processed_num
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        indices = list(self.remaining_indices)
        indices += indices[:self.total_size - len(indices)]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples


class _Handler:
    """Save/restore/sync of one kind of object held by a TorchState."""

    def __init__(self, value):
        self.value = value
        self.save()


class _ModelHandler(_Handler):
    def save(self):
        self.saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self.saved)

    def sync(self, root):
        broadcast_parameters(self.value.state_dict(), root_rank=root)


class _OptimizerHandler(_Handler):
    def save(self):
        self.saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        reset = getattr(self.value, "_reset", None)
        if reset is not None:
            reset()  # drop gradient requests of the broken step
        self.value.load_state_dict(self.saved)

    def sync(self, root):
        broadcast_optimizer_state(self.value, root_rank=root)


class _SamplerHandler(_Handler):
    def save(self):
        self.saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self.saved)

    def sync(self, root):
        self.value.load_state_dict(broadcast_object(self.value.state_dict(), root_rank=root,
                                                    name="tutti.elastic.sampler"))


def _handler_for(value):
    if isinstance(value, torch.nn.Module):
        return _ModelHandler(value)
    if isinstance(value, torch.optim.Optimizer):
        return _OptimizerHandler(value)
    if isinstance(value, ElasticSampler):
        return _SamplerHandler(value)
    return None


class TorchState(ObjectState):
    """State of a torch training run: a model, an optimizer, ElasticSamplers (by keyword)
    and any other picklable attributes (epoch, batch, ...).

    commit() copies the model's and optimizer's state_dict, the samplers' positions and
    the attributes; restore() loads those copies; sync() broadcasts them all from the root.
    """

    def __init__(self, model=None, optimizer=None, **kwargs):
        self._handlers = {}
        plain = {}
        for name, value in dict(kwargs, model=model, optimizer=optimizer).items():
            handler = _handler_for(value) if value is not None else None
            if handler is not None:
                self._handlers[name] = handler
                object.__setattr__(self, name, value)
            elif name not in ("model", "optimizer"):
                plain[name] = value
        super().__init__(bcast_object=self._broadcast_values, **plain)

    @staticmethod
    def _broadcast_values(values, root):
        return broadcast_object(values, root_rank=root, name="tutti.elastic.objects")

    def save(self):
        for handler in getattr(self, "_handlers", {}).values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync_from(self, root_rank):
        for handler in self._handlers.values():
            handler.sync(root_rank)
        super().sync_from(root_rank)
