"""Loads the tutti core library and declares its C ABI (include/tutti/c_api.h) for ctypes.

The core is one shared library per process, found next to this file. It is loaded with
RTLD_LOCAL: it links the system's Gloo, whose symbols must stay invisible to other
libraries in the process (torch exports its own, incompatible Gloo), and RTLD_DEEPBIND, so
that torch's Gloo cannot interpose on it either. Framework plugins reach the same loaded
copy through their DT_NEEDED entry on the soname libtutti_core.so.1.
"""

import ctypes
import os

from . import gpu_libraries
from .c_api import (  # noqa: F401  (the C ABI's numbers, re-exported for the frontends)
    C_API_VERSION,
    GLOBAL_PROCESS_SET,
    Collective,
    DeviceType,
    DType,
    ReduceCode,
    Status,
)
from .exceptions import error_for_status

LIBRARY_NAME = "libtutti_core.so"

OK = Status.OK


class Tensor(ctypes.Structure):
    """struct tutti_tensor: a dense, C-contiguous tensor in host memory."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
    ]


# void (*tutti_done_fn)(void* user_data, tutti_status status, const char* message)
DONE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)

# void* (*tutti_allocate_fn)(void* user_data, int32_t index, int32_t ndim, const int64_t* shape)
ALLOCATE_FN = ctypes.CFUNCTYPE(
    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32,
    ctypes.POINTER(ctypes.c_int64),
)

# The collectives under the short names the frontends use (core.ALLREDUCE is
# Collective.ALLREDUCE; tests/core:contracts_test checks each name).
ALLREDUCE, ALLGATHER, BROADCAST, ALLTOALL, REDUCESCATTER, BARRIER, JOIN = Collective


class Completion(ctypes.Structure):
    """tutti_completion: a request's outcome, written by the core's thread (no callback)."""

    _fields_ = [
        ("state", ctypes.c_int32),
        ("status", ctypes.c_int32),
        ("message", ctypes.c_char * 1024),
    ]


class Request(ctypes.Structure):
    """struct tutti_request: one collective request for tutti_enqueue (same field order)."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("collective", ctypes.c_int),
        ("process_set", ctypes.c_int32),
        ("num_tensors", ctypes.c_int32),
        ("inputs", ctypes.POINTER(Tensor)),
        ("outputs", ctypes.POINTER(Tensor)),
        ("allocate", ALLOCATE_FN),
        ("reduce_op", ctypes.c_int),
        ("prescale", ctypes.c_double),
        ("postscale", ctypes.c_double),
        ("root_rank", ctypes.c_int32),
        ("splits", ctypes.POINTER(ctypes.c_int32)),
        ("received_splits", ctypes.POINTER(ctypes.c_int32)),
        ("result", ctypes.POINTER(ctypes.c_int32)),
        ("done", DONE_FN),
        ("user_data", ctypes.c_void_p),
    ]


class Device(ctypes.Structure):
    """struct tutti_device (C ABI minor version 1): where a request's tensors live."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("type", ctypes.c_int),
        ("index", ctypes.c_int32),
        ("ready_event", ctypes.c_void_p),
        ("done_event", ctypes.c_void_p),
    ]


DEVICE_CPU = DeviceType.CPU
DEVICE_CUDA = DeviceType.CUDA

# name: (restype, argtypes) for every function of the C ABI.
_SIGNATURES = {
    "tutti_c_api_version": (ctypes.c_int, []),
    "tutti_version": (ctypes.c_char_p, []),
    "tutti_built": (ctypes.c_int, [ctypes.c_char_p]),
    "tutti_init": (ctypes.c_int, []),
    "tutti_shutdown": (ctypes.c_int, []),
    "tutti_is_initialized": (ctypes.c_int, []),
    "tutti_last_error": (ctypes.c_char_p, []),
    "tutti_rank": (ctypes.c_int, []),
    "tutti_size": (ctypes.c_int, []),
    "tutti_local_rank": (ctypes.c_int, []),
    "tutti_local_size": (ctypes.c_int, []),
    "tutti_cross_rank": (ctypes.c_int, []),
    "tutti_cross_size": (ctypes.c_int, []),
    "tutti_controller": (ctypes.c_char_p, []),
    "tutti_background_thread_id": (ctypes.c_int64, []),
    "tutti_allreduce_async": (
        ctypes.c_int,
        [
            ctypes.c_char_p,
            ctypes.POINTER(Tensor),
            ctypes.POINTER(Tensor),
            ctypes.c_int,
            ctypes.c_double,
            ctypes.c_double,
            DONE_FN,
            ctypes.c_void_p,
        ],
    ),
    "tutti_enqueue": (ctypes.c_int, [ctypes.POINTER(Request)]),
    "tutti_c_api_minor_version": (ctypes.c_int, []),
    "tutti_enqueue_on_device": (ctypes.c_int, [ctypes.POINTER(Request), ctypes.POINTER(Device)]),
    "tutti_run": (
        ctypes.c_int, [ctypes.POINTER(Request), ctypes.c_double, ctypes.POINTER(ctypes.c_int32)],
    ),
    "tutti_gpu_library_error": (ctypes.c_char_p, [ctypes.c_char_p]),
    "tutti_add_process_set": (
        ctypes.c_int,
        [ctypes.POINTER(ctypes.c_int32), ctypes.c_int32, ctypes.POINTER(ctypes.c_int32)],
    ),
    "tutti_remove_process_set": (ctypes.c_int, [ctypes.c_int32]),
    "tutti_process_set_rank": (ctypes.c_int, [ctypes.c_int32]),
    "tutti_process_set_size": (ctypes.c_int, [ctypes.c_int32]),
    "tutti_process_set_ranks": (
        ctypes.c_int, [ctypes.c_int32, ctypes.POINTER(ctypes.c_int32), ctypes.c_int32],
    ),
    "tutti_mpi_threads_supported": (ctypes.c_int, []),
    "tutti_completion_test": (ctypes.c_int, [ctypes.c_void_p]),
    "tutti_completion_wait": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_double]),
    "tutti_start_timeline": (ctypes.c_int, [ctypes.c_char_p]),
    "tutti_stop_timeline": (ctypes.c_int, []),
    "tutti_counter_count": (ctypes.c_int, []),
    "tutti_counter_name": (ctypes.c_char_p, [ctypes.c_int]),
    "tutti_counters": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int64), ctypes.c_int]),
}


def library_path():
    """Absolute path of the core library this package loads."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)


def _load():
    # The core finds libcudart/libnccl of pip's nvidia-* packages through this variable.
    gpu_libraries.export_search_path()
    path = library_path()
    if not os.path.exists(path):
        raise ImportError(
            "the tutti core library is missing: %s does not exist. Install tutti-core "
            "with `pip install ./common` from the tutti source tree; to use the source "
            "tree itself, build it in place: `cd common && python setup.py build_ext "
            "--inplace`." % path
        )
    try:
        # RTLD_DEEPBIND: the core and the libraries loaded with it (the system's Gloo) look
        # up symbols among themselves first, even when torch was loaded RTLD_GLOBAL
        # (TORCH_USE_RTLD_GLOBAL=1) and exports gloo:: symbols of its own.
        lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_DEEPBIND)
    except OSError as exc:
        raise ImportError("cannot load the tutti core library %s: %s" % (path, exc)) from exc
    for name, (restype, argtypes) in _SIGNATURES.items():
        try:
            function = getattr(lib, name)
        except AttributeError:
            raise ImportError(
                "the tutti core library %s does not export %s; it is older or newer than "
                "this tutti.common package, reinstall tutti-core (`pip install ./common`)"
                % (path, name)
            ) from None
        function.restype = restype
        function.argtypes = argtypes
    found = lib.tutti_c_api_version()
    if found != C_API_VERSION:
        raise ImportError(
            "the tutti core library %s has C API version %d but this tutti.common package "
            "expects version %d; reinstall tutti-core (`pip install ./common`) so that the "
            "library and the Python package come from the same source"
            % (path, found, C_API_VERSION)
        )
    return lib


lib = _load()


def last_error():
    """Message of the last failed core call made on this thread."""
    message = lib.tutti_last_error()
    return message.decode("utf-8", "replace") if message else ""


def check(status):
    """Raises the exception matching a non-OK tutti_status, with the core's message."""
    if status != OK:
        raise error_for_status(status, last_error() or "no details reported by the core")


def version():
    """Version string of the loaded core library."""
    return lib.tutti_version().decode()
