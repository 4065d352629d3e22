"""`tutti.mxnet.mpi_ops`: the module path of Horovod's MXNet collectives.

Scripts written for Horovod import from horovod.mxnet.mpi_ops (for example
`from horovod.mxnet.mpi_ops import allreduce_`); the same objects as tutti.mxnet offers.
"""

from tutti.mxnet import *  # noqa: F401,F403
