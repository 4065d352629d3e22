"""SyncBatchNorm: batch normalization whose training statistics cover the batches of every
rank, as if one process normalized the concatenated batch (Horovod's hvd.SyncBatchNorm).

Forward: each rank computes its per-channel count, mean and sum of squared deviations;
one allgather exchanges them and every rank combines them (the parallel variance formula,
stable where E[x^2] - E[x]^2 is not). Backward: one allreduce sums the per-channel sums of
dy and dy * x_hat over the ranks, which is all the input gradient needs. Evaluation with
running statistics is the local torch batch_norm; nothing is exchanged.
"""

import torch
import torch.nn.functional as F
from tutti.common.basics import Sum
from tutti.common.process_sets import global_process_set

from .reductions import allreduce
from .data_movement import allgather

_HALF = (torch.float16, torch.bfloat16)


def _reduced_dims(x):
    return [0] + list(range(2, x.dim()))


def _channel_view(values, x):
    return values.view([1, -1] + [1] * (x.dim() - 2))


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, factor, process_set):
        compute = torch.float32 if x.dtype in _HALF else x.dtype
        xc = x.to(compute)
        channels = x.shape[1]
        dims = _reduced_dims(x)
        count = x.numel() // channels if channels else 0
        if count:
            mean = xc.mean(dims)
            m2 = ((xc - _channel_view(mean, x)) ** 2).sum(dims)
        else:
            mean = m2 = torch.zeros(channels, dtype=compute, device=x.device)
        local = torch.cat([torch.tensor([float(count)], dtype=torch.float64, device=x.device),
                           mean.to(torch.float64), m2.to(torch.float64)])
        gathered = allgather(local.view(1, -1), process_set=process_set)
        counts = gathered[:, :1]
        means = gathered[:, 1:1 + channels]
        m2s = gathered[:, 1 + channels:]
        total = counts.sum()
        if total.item() == 0:
            raise ValueError("SyncBatchNorm got empty batches on every rank")
        global_mean = (counts * means).sum(0) / total
        global_m2 = (m2s + counts * (means - global_mean) ** 2).sum(0)
        var = global_m2 / total
        invstd = torch.rsqrt(var + eps)
        if running_mean is not None:
            with torch.no_grad():
                unbiased = global_m2 / max(total.item() - 1.0, 1.0)
                running_mean.mul_(1.0 - factor).add_((factor * global_mean).to(running_mean.dtype))
                running_var.mul_(1.0 - factor).add_((factor * unbiased).to(running_var.dtype))
        invstd = invstd.to(compute)
        xhat = (xc - _channel_view(global_mean.to(compute), x)) * _channel_view(invstd, x)
        y = xhat
        if weight is not None:
            y = y * _channel_view(weight.to(compute), x) + _channel_view(bias.to(compute), x)
        ctx.save_for_backward(xhat, invstd, weight)
        ctx.total = total.item()
        ctx.process_set = process_set
        ctx.dtypes = (x.dtype, None if weight is None else weight.dtype)
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        xhat, invstd, weight = ctx.saved_tensors
        x_dtype, w_dtype = ctx.dtypes
        dyc = dy.to(xhat.dtype)
        dims = _reduced_dims(xhat)
        sum_dy = dyc.sum(dims)
        sum_dy_xhat = (dyc * xhat).sum(dims)
        grad_weight = grad_bias = None
        if weight is not None:
            grad_weight = sum_dy_xhat.to(w_dtype)
            grad_bias = sum_dy.to(w_dtype)
        grad_x = None
        if ctx.needs_input_grad[0]:
            # d(sum of every rank's loss)/dx needs the per-channel sums over all ranks.
            sums = allreduce(torch.cat([sum_dy, sum_dy_xhat]), op=Sum,
                             process_set=ctx.process_set)
            channels = sum_dy.numel()
            total_dy, total_dy_xhat = sums[:channels], sums[channels:]
            scale = invstd / ctx.total
            if weight is not None:
                scale = scale * weight.to(xhat.dtype)
            grad_x = _channel_view(scale, xhat) * (
                ctx.total * dyc - _channel_view(total_dy, xhat)
                - xhat * _channel_view(total_dy_xhat, xhat))
            grad_x = grad_x.to(x_dtype)
        return grad_x, grad_weight, grad_bias, None, None, None, None, None


class SyncBatchNorm(torch.nn.modules.batchnorm._BatchNorm):
    """Drop-in for torch.nn.BatchNorm1d/2d/3d (input of shape (N, C, ...)) that, in
    training, normalizes with the mean and variance of the batches of every rank of
    `process_set` and updates the running statistics with them. Every rank of the set
    must run forward and backward of the layer in step. In evaluation (with running
    statistics) it is the local batch norm."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None,
                 process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         device=device, dtype=dtype)
        self.process_set = process_set or global_process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("SyncBatchNorm expects an input of at least 2 dimensions "
                             "(N, C, ...), got %dD" % input.dim())

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked)
        batch_stats = self.training or self.running_mean is None
        running_mean = self.running_mean if not self.training or self.track_running_stats \
            else None
        running_var = self.running_var if not self.training or self.track_running_stats \
            else None
        shared = self.process_set.included() and self.process_set.size() > 1
        if not batch_stats or not shared:
            return F.batch_norm(input, running_mean, running_var, self.weight, self.bias,
                                batch_stats, factor, self.eps)
        return _SyncBatchNormFunction.apply(input, self.weight, self.bias, running_mean,
                                            running_var, self.eps, factor, self.process_set)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_set=global_process_set):
        """`module` with every torch.nn.BatchNorm*d in it replaced by a SyncBatchNorm that
        keeps its parameters and running statistics."""
        converted = module
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and \
                not isinstance(module, SyncBatchNorm):
            converted = cls(module.num_features, module.eps, module.momentum, module.affine,
                            module.track_running_stats, process_set=process_set)
            if module.affine:
                with torch.no_grad():
                    converted.weight = module.weight
                    converted.bias = module.bias
            converted.running_mean = module.running_mean
            converted.running_var = module.running_var
            converted.num_batches_tracked = module.num_batches_tracked
            converted.train(module.training)
        for name, child in module.named_children():
            converted.add_module(name, cls.convert_sync_batchnorm(child, process_set))
        return converted
