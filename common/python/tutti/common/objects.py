"""How broadcast_object and allgather_object turn Python objects into bytes, in every
framework: cloudpickle, as Horovod 0.28.1 does, so that lambdas, closures and classes
defined in the script travel too. The receiving side needs only the standard pickle."""

import pickle

try:
    import cloudpickle
except ImportError:  # pragma: no cover - tutti-core depends on cloudpickle
    cloudpickle = None


def dumps(obj):
    """`obj` as bytes; cloudpickle when installed (it is a dependency of tutti-core)."""
    if cloudpickle is not None:
        return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def loads(data):
    """The object `dumps` made of `data` (bytes-like)."""
    return pickle.loads(data)
