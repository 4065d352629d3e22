"""Lets `import mxnet` work first thing in a script, with numpy >= 1.24.

MXNet 1.9 uses `numpy.bool`, an alias that numpy 1.24 removed. Installed into a virtual
environment's site-packages together with tutti_mxnet_numpy_alias.pth (whose one line
imports this module at interpreter start-up), it watches for the first import of mxnet
and restores the alias just before it. Nothing else is imported at start-up, so
interpreters that never import mxnet pay nothing for it.
"""

import sys


class _RestoreNumpyBool:
    """A meta path entry that restores numpy.bool when mxnet is about to be imported."""

    def find_spec(self, name, path=None, target=None):
        if name == "mxnet":
            sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
            import numpy

            # vars() instead of hasattr(): hasattr would make numpy print a FutureWarning.
            if "bool" not in vars(numpy):
                numpy.bool = bool
        return None  # the regular finders locate mxnet


def install():
    if not any(isinstance(f, _RestoreNumpyBool) for f in sys.meta_path):
        sys.meta_path.insert(0, _RestoreNumpyBool())


install()
