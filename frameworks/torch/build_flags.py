"""How tutti-torch's op library is compiled: torch's headers, defines and libraries.

The plugin's own recipe, read by its setup.py (through tutti.common.build) and by Bazel's
`local_env` rule (through tutti.common.build_flags). flags() returns only what torch needs;
the flags every plugin shares are added by tutti.common.build_flags.
"""


def flags():
    import sysconfig

    import torch
    from torch.utils import cpp_extension

    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return {
        "version": torch.__version__,
        # The library also builds tutti.torch's Python entry (Python's and torch's Python
        # headers; libtorch_python for its tensor objects).
        "include_dirs": cpp_extension.include_paths() + [sysconfig.get_paths()["include"]],
        "defines": ["_GLIBCXX_USE_CXX11_ABI=%d" % abi, "TORCH_API_INCLUDE_EXTENSION_H"],
        # torch headers use a few C++20 spellings that C++17 accepts with a warning.
        "cflags": ["-std=c++17", "-Wno-c++20-extensions"],
        "library_dirs": [cpp_extension.library_paths()[0]],
        "libraries": ["c10", "torch_cpu", "torch_python"],
    }
