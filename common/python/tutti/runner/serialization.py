"""Pickling for tutti.runner.run: cloudpickle when installed (lambdas, closures and
functions defined in __main__ travel by value), the standard pickle otherwise (functions
travel by reference and must be importable by the workers)."""

import pickle

try:
    import cloudpickle as _pickler
except ImportError:  # pragma: no cover - depends on the environment
    _pickler = pickle


def dumps(obj):
    return _pickler.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def loads(data):
    return pickle.loads(data)
