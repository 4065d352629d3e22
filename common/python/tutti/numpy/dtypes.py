"""numpy dtype <-> tutti_dtype code."""

import numpy

from tutti.common import DTYPE, InvalidArgumentError

try:  # bfloat16 is not a numpy type; ml_dtypes (installed by TensorFlow) provides one.
    import ml_dtypes
except ImportError:
    ml_dtypes = None

_CODES = {
    numpy.dtype(name): code for name, code in DTYPE.items() if name != "bfloat16"
}
if ml_dtypes is not None:
    _CODES[numpy.dtype(ml_dtypes.bfloat16)] = DTYPE["bfloat16"]


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
