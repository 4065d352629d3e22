"""The numbers of the C ABI (include/tutti/c_api.h): its enums and constants, the one place
Python states them.

Every frontend takes collective, dtype, reduction and status codes from here (through
`tutti.common.core`, which re-exports them); a test compares each enum with the header. This
module loads nothing, so tutti.common.exceptions can use it before the core is loaded.
"""

import enum

# TUTTI_C_API_VERSION and TUTTI_C_API_MINOR_VERSION of the header this package is written for.
C_API_VERSION = 1
C_API_MINOR_VERSION = 2

# TUTTI_GLOBAL_PROCESS_SET: the id of the set of every rank.
GLOBAL_PROCESS_SET = 0


class Status(enum.IntEnum):
    """tutti_status: the result of a call or of a request."""

    OK = 0
    ERR_NOT_INITIALIZED = 1
    ERR_INVALID_ARGUMENT = 2
    ERR_PRECONDITION = 3
    ERR_UNSUPPORTED = 4
    ERR_ABORTED = 5
    ERR_INTERNAL = 6


class DType(enum.IntEnum):
    """tutti_dtype: element types; the lower-case member name is the numpy-style name."""

    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    INT32 = 4
    INT64 = 5
    FLOAT16 = 6
    BFLOAT16 = 7
    FLOAT32 = 8
    FLOAT64 = 9
    BOOL = 10


class ReduceCode(enum.IntEnum):
    """tutti_reduce_op: the core's numbering of reductions. Horovod numbers them differently
    (tutti.common.ReduceOp); basics.core_reduce_op() translates."""

    AVERAGE = 0
    SUM = 1
    MIN = 2
    MAX = 3
    PRODUCT = 4
    ADASUM = 5


class Collective(enum.IntEnum):
    """tutti_collective: the collective a request asks for (the header's TUTTI_OP_*)."""

    ALLREDUCE = 0
    ALLGATHER = 1
    BROADCAST = 2
    ALLTOALL = 3
    REDUCESCATTER = 4
    BARRIER = 5
    JOIN = 6


class DeviceType(enum.IntEnum):
    """tutti_device_type: where a request's tensors live (C ABI minor version 1)."""

    CPU = 0
    CUDA = 1


# Each enum with the header's typedef name and the prefix of its constants.
HEADER_ENUMS = {
    "tutti_status": (Status, "TUTTI_"),
    "tutti_dtype": (DType, "TUTTI_"),
    "tutti_reduce_op": (ReduceCode, "TUTTI_REDUCE_"),
    "tutti_collective": (Collective, "TUTTI_OP_"),
    "tutti_device_type": (DeviceType, "TUTTI_DEVICE_"),
}

# Each constant with the header's macro name.
HEADER_DEFINES = {
    "TUTTI_C_API_VERSION": C_API_VERSION,
    "TUTTI_C_API_MINOR_VERSION": C_API_MINOR_VERSION,
    "TUTTI_GLOBAL_PROCESS_SET": GLOBAL_PROCESS_SET,
}


def dtype_names():
    """Element type name -> tutti_dtype code, in the order of the codes ("float32": 8)."""
    return {member.name.lower(): int(member) for member in DType}
