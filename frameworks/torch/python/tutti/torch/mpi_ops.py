"""Horovod's module path `horovod.torch.mpi_ops`, for scripts that import from it
(`from tutti.torch.mpi_ops import allreduce_async, synchronize`): the same objects as
tutti.torch offers."""

from tutti.torch import *  # noqa: F401,F403
