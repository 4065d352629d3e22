"""Checks, names and the push of one request onto MXNet's dependency engine.

Every collective of tutti.mxnet returns at once. The engine runs the request once every
earlier write to its inputs is done; reading a result (asnumpy(), wait_to_read(), or any
operator that uses it) waits for it. A failure reported by the core surfaces there as
mxnet.base.MXNetError carrying the core's message.
"""

import ctypes

import mxnet as mx
import numpy
from tutti.common import basics, naming, process_sets
from tutti.common.exceptions import NotInitializedError, UnsupportedError

from . import _native

# Devices whose NDArrays live in host memory, which is where the core reads and writes.
_HOST_DEVICES = ("cpu", "cpu_pinned", "cpu_shared")


def dtype_name(array):
    """The element type of an NDArray as named in tutti.common.basics.DTYPE."""
    dtype = numpy.dtype(array.dtype)
    if dtype.names == ("bfloat16",):  # MXNet spells bfloat16 as a structured dtype
        return "bfloat16"
    return dtype.name


def check_tensor(tensor, function):
    """Raises a clear error for anything the core cannot take."""
    if not isinstance(tensor, mx.nd.NDArray):
        raise TypeError(
            "tutti.mxnet.%s expects an mxnet.nd.NDArray, got %s" % (function, type(tensor).__name__)
        )
    if tensor.stype != "default":
        raise UnsupportedError(
            "tutti.mxnet.%s supports dense NDArrays only, got storage type %r; convert with "
            "tensor.tostype('default')" % (function, tensor.stype)
        )
    if tensor.context.device_type not in _HOST_DEVICES:
        raise UnsupportedError(
            "tutti.mxnet.%s supports NDArrays in host memory only, got one on %s; copy it with "
            "tensor.as_in_context(mx.cpu())" % (function, tensor.context)
        )
    name = dtype_name(tensor)
    if name not in basics.DTYPE:
        raise TypeError(
            "tutti.mxnet.%s does not support dtype %s; supported: %s"
            % (function, name, ", ".join(sorted(basics.DTYPE)))
        )


def check_group(tensors, function):
    """The list of NDArrays of a grouped call, each checked."""
    if isinstance(tensors, mx.nd.NDArray) or not isinstance(tensors, (list, tuple)):
        raise TypeError("tutti.mxnet.%s expects a list of NDArrays, got %s"
                        % (function, type(tensors).__name__))
    if not tensors:
        raise ValueError("tutti.mxnet.%s needs at least one NDArray" % function)
    for tensor in tensors:
        check_tensor(tensor, function)
    return list(tensors)


def check_initialized(function):
    if not basics.is_initialized():
        raise NotInitializedError(
            "tutti.mxnet.%s was called before tutti was initialized; call hvd.init() first"
            % function
        )


def prepare(function, process_set, name, kind):
    """Checks the job state and returns (process set id, request name). Unnamed requests are
    numbered per kind and process set in call order, like every tutti frontend."""
    if name is not None:
        naming.checked_name(name)  # a ValueError before any other check
    check_initialized(function)
    set_id = process_sets.request_id(process_set)
    return set_id, naming.request_name(name, kind, set_id, prefix="mxnet")


def empty_like(tensor, shape):
    """A new NDArray of `shape` with the dtype, device and array interface of `tensor`."""
    output = mx.nd.empty(shape, ctx=tensor.context, dtype=tensor.dtype)
    if isinstance(tensor, mx.np.ndarray):  # answer in the caller's array interface
        output = output.as_np_ndarray()
    return output


def push(collective, inputs, outputs, name, set_id, op=basics.ReduceOp.Sum, prescale=1.0,
         postscale=1.0, root_rank=0, splits=None, priority=0):
    """Pushes one request onto the engine; outputs[i] is inputs[i] for in place."""
    count = len(inputs)
    input_handles = (ctypes.c_void_p * count)(*[t.handle.value for t in inputs])
    output_handles = (ctypes.c_void_p * count)(*[t.handle.value for t in outputs])
    split_buffer = None
    if splits is not None:
        split_buffer = (ctypes.c_int32 * max(len(splits), 1))(*splits)
    status = _native.lib.tutti_mxnet_enqueue_async(
        int(collective), input_handles, output_handles, count, name.encode("utf-8"),
        int(set_id), basics.core_reduce_op(op), float(prescale), float(postscale), int(root_rank),
        split_buffer, 0 if splits is None else len(splits), int(priority),
    )
    if status != 0:
        raise mx.base.MXNetError(_native.last_error())
