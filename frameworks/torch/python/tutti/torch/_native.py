"""Loads the native library (libtutti_torch_ops.so) and its Python entry, `entry`.

The library is compiled against one torch version; build_info.json beside it records which.
tutti.common is imported first so that the library's dependency on the core's soname is
satisfied by the core already loaded in this process (one core per process). `entry` is
a module built by the library (src/python_entry.cc): enqueue, run, poll and wait, which
raise the tutti.common exception for an error the core reports.
"""

import ctypes
import os

import torch
from tutti.common import plugin
from tutti.common.exceptions import error_for_status

LIBRARY_NAME = "libtutti_torch_ops.so"

# ctypes.PyDLL: calls into it hold the GIL and raise the Python error they set.
_library = plugin.load_native_library(
    os.path.dirname(os.path.abspath(__file__)),
    LIBRARY_NAME,
    "torch",
    torch.__version__,
    ctypes.PyDLL,
)
_create_entry = _library.tutti_torch_python_entry
_create_entry.argtypes = [ctypes.py_object]
_create_entry.restype = ctypes.py_object
entry = _create_entry(error_for_status)
