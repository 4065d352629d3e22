"""How tutti-mxnet's op library is compiled: MXNet's headers, defines and library.

The plugin's own recipe, read by its setup.py (through tutti.common.build) and by Bazel's
`local_env` rule (through tutti.common.build_flags). flags() returns only what MXNet needs;
the flags every plugin shares are added by tutti.common.build_flags.
"""

import os


def _mxnet_module():
    import numpy

    # MXNet 1.9 still refers to numpy.bool, which numpy 1.24 removed.
    if "bool" not in vars(numpy):
        numpy.bool = bool
    import mxnet

    return mxnet


def flags():
    mxnet = _mxnet_module()
    include = mxnet.libinfo.find_include_path()
    lib = mxnet.libinfo.find_lib_path()[0]
    return {
        "version": mxnet.__version__,
        "include_dirs": [include, os.path.join(include, "mkldnn")],
        "defines": [
            "_GLIBCXX_USE_CXX11_ABI=0",  # MXNet 1.9 is built with the old libstdc++ ABI
            "MSHADOW_USE_CUDA=0",
            "MSHADOW_USE_MKL=0",
            "MSHADOW_USE_F16C=0",
            "MXNET_USE_MKLDNN=1",
        ],
        "cflags": ["-std=c++17"],  # MXNet's headers fail as C++20
        "library_dirs": [os.path.dirname(lib)],
        "libraries": ["mxnet"],
    }
