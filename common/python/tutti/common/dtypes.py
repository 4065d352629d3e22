"""numpy dtype <-> tutti_dtype code, for requests on host arrays."""

import numpy

from .basics import DTYPE
from .exceptions import InvalidArgumentError

try:  # bfloat16 is not a numpy type; ml_dtypes (installed by TensorFlow) provides one.
    import ml_dtypes
except ImportError:
    ml_dtypes = None


def _numpy_dtype(name):
    if name == "bfloat16":
        return numpy.dtype(ml_dtypes.bfloat16) if ml_dtypes is not None else None
    return numpy.dtype(name)


# In the order of the C ABI's codes.
_CODES = {
    _numpy_dtype(name): code
    for name, code in sorted(DTYPE.items(), key=lambda item: item[1])
    if _numpy_dtype(name) is not None
}


def codes():
    """The dict numpy dtype -> tutti_dtype code of the supported dtypes (not to be changed)."""
    return _CODES


def supported():
    """The numpy dtypes tutti accepts here (bfloat16 only when ml_dtypes is installed)."""
    return list(_CODES)


def code_of(dtype):
    """tutti_dtype code of a numpy dtype; InvalidArgumentError for any other dtype."""
    try:
        return _CODES[numpy.dtype(dtype)]
    except (KeyError, TypeError):
        names = ", ".join(str(d) for d in _CODES)
        hint = "" if ml_dtypes is not None else " (bfloat16 needs the ml_dtypes package)"
        raise InvalidArgumentError(
            "tutti does not support dtype %s; supported: %s%s" % (dtype, names, hint)
        ) from None
