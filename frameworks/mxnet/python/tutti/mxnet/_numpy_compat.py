"""Lets MXNet 1.9 import with numpy >= 1.24.

MXNet 1.9 still uses the alias `numpy.bool`, which numpy 1.24 removed, so `import mxnet`
fails without it. Importing this module before mxnet restores the alias. The module
dictionary is checked instead of hasattr(), which would make numpy print a FutureWarning.
"""

import numpy

if "bool" not in vars(numpy):
    numpy.bool = bool
