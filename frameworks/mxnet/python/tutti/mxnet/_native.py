"""Loads libtutti_mxnet_ops.so, the native op library next to this file, and declares
its C functions (src/ops.h) for ctypes."""

import ctypes
import os

import mxnet
from tutti.common import plugin

LIBRARY_NAME = "libtutti_mxnet_ops.so"
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

_SIGNATURES = {
    "tutti_mxnet_enqueue_async": (
        ctypes.c_int,
        [
            ctypes.c_int,  # tutti_collective
            ctypes.POINTER(ctypes.c_void_p),  # input NDArrayHandles
            ctypes.POINTER(ctypes.c_void_p),  # output NDArrayHandles (inputs for in place)
            ctypes.c_int,  # number of tensors
            ctypes.c_char_p,  # name
            ctypes.c_int,  # process set id
            ctypes.c_int,  # tutti_reduce_op
            ctypes.c_double,  # prescale
            ctypes.c_double,  # postscale
            ctypes.c_int,  # root rank (global)
            ctypes.POINTER(ctypes.c_int32),  # alltoall splits, or NULL
            ctypes.c_int,  # number of splits
            ctypes.c_int,  # engine priority
        ],
    ),
    "tutti_mxnet_last_error": (ctypes.c_char_p, []),
}


def _load():
    # The core is already loaded (tutti.common was imported first), so the library's
    # DT_NEEDED libtutti_core.so.1 resolves to that copy.
    lib = plugin.load_native_library(
        PACKAGE_DIR, LIBRARY_NAME, "mxnet", mxnet.__version__, ctypes.CDLL
    )
    for name, (restype, argtypes) in _SIGNATURES.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib


lib = _load()


def last_error():
    """Message of the last failed call of the op library on this thread."""
    message = lib.tutti_mxnet_last_error()
    return message.decode("utf-8", "replace") if message else ""
