"""Helpers built on the collectives: broadcasting model parameters, optimizer state and
arbitrary picklable objects, and gathering objects from every rank."""

import torch
from tutti.common import basics, objects
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
    """Returns rank `root_rank`'s `obj` on every rank of `process_set` (`root_rank` is a
    global rank, as in Horovod). The object is serialized with cloudpickle, as in Horovod,
    so lambdas and closures work too."""
    is_root = basics.rank() == root_rank
    if is_root:
        data = torch.frombuffer(bytearray(objects.dumps(obj)), dtype=torch.uint8)
        length = torch.tensor([data.numel()], dtype=torch.int64)
    else:
        data = None
        length = torch.zeros(1, dtype=torch.int64)
    broadcast_(length, root_rank, name=_sub_name(name, "size"), process_set=process_set)
    if data is None:
        data = torch.empty(int(length.item()), dtype=torch.uint8)
    broadcast_(data, root_rank, name=_sub_name(name, "data"), process_set=process_set)
    if is_root:
        return obj
    return objects.loads(data.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's `obj`, in rank order of `process_set`; serialized
    with cloudpickle, as in Horovod."""
    data = torch.frombuffer(bytearray(objects.dumps(obj)), dtype=torch.uint8)
    lengths = allgather(torch.tensor([data.numel()], dtype=torch.int64),
                        name=_sub_name(name, "sizes"), process_set=process_set)
    gathered = allgather(data, name=_sub_name(name, "data"), process_set=process_set)
    return [objects.loads(part.numpy().tobytes())
            for part in torch.split(gathered, lengths.tolist())]


class _TensorLayout:
    """Stands for a tensor of the root's optimizer state while its layout is broadcast."""

    def __init__(self, tensor):
        self.shape = tuple(tensor.shape)
        self.dtype = tensor.dtype
        self.is_cuda = tensor.is_cuda  # receivers keep it on their own GPU then


def _zero_gradient(optimizer, param):
    grad = torch.zeros_like(param)
    # SparseAdam refuses dense gradients.
    return grad.to_sparse() if isinstance(optimizer, torch.optim.SparseAdam) else grad


def _materialize_state(optimizer):
    """Creates the state an optimizer makes lazily on its first step, by taking one step
    with zero gradients and then restoring the parameters and their gradients.

    Purely local: a DistributedOptimizer's own step() would submit an allreduce for every
    gradient, which ranks that already have state never submit (the resume hang), so the
    wrapped optimizer's step runs directly."""
    from .optimizer import _DistributedMixin  # circular at import time otherwise

    saved = []
    for group in optimizer.param_groups:
        for param in group["params"]:
            if not param.requires_grad:
                continue
            saved.append((param, param.detach().clone(), param.grad))
            param.grad = _zero_gradient(optimizer, param)
    step = optimizer.step
    if isinstance(optimizer, _DistributedMixin):
        step = super(_DistributedMixin, optimizer).step
    try:
        with torch.no_grad():
            if isinstance(optimizer, torch.optim.LBFGS):
                step(lambda: torch.zeros(()))
            else:
                step()
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
        items = [_replace_tensors(v, convert) for v in value]
        if hasattr(value, "_fields"):  # a namedtuple
            return type(value)(*items)
        return type(value)(items)
    return value


def broadcast_optimizer_state(optimizer, root_rank, model=None, process_set=global_process_set):
    """Makes every rank's optimizer state (per-parameter state and every option of every
    parameter group, tuples such as betas included) a copy of rank `root_rank`'s. Works
    for every torch.optim optimizer, wrapped in DistributedOptimizer or not, and for the
    resume pattern where only the root loaded a checkpoint.

    Only the root's state decides what is sent: the root creates lazily made state with a
    local zero-gradient step when it has none (parameters unchanged, no collectives), then
    its whole state's layout and tensors are broadcast and loaded on every rank.
    model: accepted for Horovod 0.28.1's signature; the optimizer alone defines the state.
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise InvalidArgumentError("broadcast_optimizer_state needs a torch.optim.Optimizer, "
                                   "got %s" % type(optimizer).__name__)
    if model is not None and not isinstance(model, torch.nn.Module):
        raise InvalidArgumentError("broadcast_optimizer_state: model must be a "
                                   "torch.nn.Module or None, got %s" % type(model).__name__)
    is_root = basics.rank() == root_rank  # a global rank, also on a process set
    if is_root and len(optimizer.state) == 0:
        _materialize_state(optimizer)
    local = []
    layout = None
    if is_root:
        layout = _replace_tensors(optimizer.state_dict(),
                                  lambda t: local.append(t) or _TensorLayout(t))
    root_layout = broadcast_object(layout, root_rank, name="broadcast_optimizer_state.layout",
                                   process_set=process_set)
    local_iter = iter(local)
    handles = []

    def receive(spec):
        if is_root:
            tensor = next(local_iter).detach().contiguous()
        else:
            # On this rank's current GPU when the root keeps it on a GPU, so that every
            # rank's request names the same kind of device.
            device = torch.device("cuda", torch.cuda.current_device()) if spec.is_cuda else "cpu"
            tensor = torch.empty(spec.shape, dtype=spec.dtype, device=device)
        handles.append(broadcast_async_(tensor, root_rank,
                                        name="broadcast_optimizer_state.%d" % len(handles),
                                        process_set=process_set))
        return tensor

    new_state = _replace_tensors(root_layout, receive)
    for handle in handles:
        synchronize(handle)
    if not is_root:
        optimizer.load_state_dict(new_state)
