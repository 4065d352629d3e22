"""Loads the native op library (libtutti_torch_ops.so) that registers the `tutti` torch ops.

The library is compiled against one torch version; build_info.json beside it records which.
tutti.common is imported first so that the library's dependency on the core's soname is
satisfied by the core already loaded in this process (one core per process).
"""

import os

import torch
from tutti.common import plugin

LIBRARY_NAME = "libtutti_torch_ops.so"

plugin.load_native_library(
    os.path.dirname(os.path.abspath(__file__)),
    LIBRARY_NAME,
    "torch",
    torch.__version__,
    torch.ops.load_library,
)

# torch.ops.tutti.<name>: enqueue, poll, wait, take_error_status (src/request_ops.cc).
ops = torch.ops.tutti
