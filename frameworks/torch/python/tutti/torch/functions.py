"""Helpers built on the collectives: broadcasting model parameters, optimizer state and
arbitrary picklable objects, and gathering objects from every rank."""

import contextlib
import pickle

import torch
from tutti.common.exceptions import InvalidArgumentError
from tutti.common.process_sets import global_process_set

from .data_movement import allgather, broadcast_, broadcast_async_
from .requests import synchronize


def _sub_name(name, part):
    return None if name is None else "%s.%s" % (name, part)


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Overwrites every tensor of `params` with rank `root_rank`'s, in place.

    params: a state_dict (e.g. model.state_dict()) or an iterable of (name, tensor) pairs
    (e.g. model.named_parameters()). The names identify the tensors across ranks."""
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        try:
            items = sorted(params, key=lambda item: item[0])
        except (TypeError, IndexError):
            raise InvalidArgumentError(
                "broadcast_parameters needs a state_dict or (name, tensor) pairs, got %s"
                % type(params).__name__) from None
    handles = []
    for name, value in items:
        if value is None:
            continue
        if not isinstance(value, torch.Tensor):
            raise InvalidArgumentError("broadcast_parameters: %r is a %s, not a tensor"
                                       % (name, type(value).__name__))
        handles.append(broadcast_async_(value, root_rank, name="broadcast_parameters.%s" % name,
                                        process_set=process_set))
    for handle in handles:
        synchronize(handle)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns rank `root_rank`'s `obj` (any picklable object) on every rank of
    `process_set`."""
    if (process_set or global_process_set).rank() == root_rank:
        payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        data = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
        length = torch.tensor([data.numel()], dtype=torch.int64)
    else:
        data = None
        length = torch.zeros(1, dtype=torch.int64)
    broadcast_(length, root_rank, name=_sub_name(name, "size"), process_set=process_set)
    if data is None:
        data = torch.empty(int(length.item()), dtype=torch.uint8)
    broadcast_(data, root_rank, name=_sub_name(name, "data"), process_set=process_set)
    if (process_set or global_process_set).rank() == root_rank:
        return obj
    return pickle.loads(data.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's `obj` (any picklable object), in rank order of
    `process_set`."""
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    data = torch.frombuffer(bytearray(payload), dtype=torch.uint8) if payload else \
        torch.empty(0, dtype=torch.uint8)
    lengths = allgather(torch.tensor([data.numel()], dtype=torch.int64),
                        name=_sub_name(name, "sizes"), process_set=process_set)
    gathered = allgather(data, name=_sub_name(name, "data"), process_set=process_set)
    objects = []
    for part in torch.split(gathered, lengths.tolist()):
        objects.append(pickle.loads(part.numpy().tobytes()))
    return objects


class _TensorLayout:
    """Stands for a tensor of the root's optimizer state while its layout is broadcast."""

    def __init__(self, tensor):
        self.shape = tuple(tensor.shape)
        self.dtype = tensor.dtype


def _materialize_state(optimizer):
    """Creates the state an optimizer makes lazily on its first step, by taking one step
    with zero gradients and then restoring the parameters and their gradients."""
    if len(optimizer.state) > 0:
        return
    saved = []
    for group in optimizer.param_groups:
        for param in group["params"]:
            if not param.requires_grad:
                continue
            saved.append((param, param.detach().clone(), param.grad))
            param.grad = torch.zeros_like(param)
    # A DistributedOptimizer must not allreduce these zero gradients: only the ranks without
    # state take this step (e.g. a worker that joined an elastic job), the others would
    # never match its requests.
    skip = getattr(optimizer, "skip_synchronize", None)
    try:
        with skip() if skip is not None else contextlib.nullcontext():
            if isinstance(optimizer, torch.optim.LBFGS):
                optimizer.step(lambda: torch.zeros(()))
            else:
                optimizer.step()
    finally:
        with torch.no_grad():
            for param, data, grad in saved:
                param.copy_(data)
                param.grad = grad


def _replace_tensors(value, convert):
    if isinstance(value, (torch.Tensor, _TensorLayout)):
        return convert(value)
    if isinstance(value, dict):
        return {k: _replace_tensors(v, convert) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_replace_tensors(v, convert) for v in value)
    return value


def broadcast_optimizer_state(optimizer, root_rank, process_set=global_process_set):
    """Makes every rank's optimizer state (per-parameter state and hyperparameters of the
    parameter groups) a copy of rank `root_rank`'s. Works for every torch.optim optimizer;
    state an optimizer creates lazily is created first with a zero-gradient step that
    leaves the parameters unchanged."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise InvalidArgumentError("broadcast_optimizer_state needs a torch.optim.Optimizer, "
                                   "got %s" % type(optimizer).__name__)
    _materialize_state(optimizer)
    state_dict = optimizer.state_dict()
    local = []
    layout = _replace_tensors(state_dict, lambda t: local.append(t) or _TensorLayout(t))
    root_layout = broadcast_object(layout, root_rank, name="broadcast_optimizer_state.layout",
                                   process_set=process_set)
    local_iter = iter(local)
    handles = []

    def receive(spec):
        mine = next(local_iter, None)
        if (mine is None or tuple(mine.shape) != spec.shape or mine.dtype != spec.dtype
                or not mine.is_contiguous()):
            mine = torch.empty(spec.shape, dtype=spec.dtype)
        else:
            mine = mine.detach().clone()
        handles.append(broadcast_async_(mine, root_rank,
                                        name="broadcast_optimizer_state.%d" % len(handles),
                                        process_set=process_set))
        return mine

    new_state = _replace_tensors(root_layout, receive)
    for handle in handles:
        synchronize(handle)
    optimizer.load_state_dict(new_state)
