"""Compiler and linker flags for native libraries built against a framework.

One source of truth for both build paths: the plugins' setup.py files import it, and
Bazel's `local_env` repository rule runs it as a script (`python build_flags.py`) and
reads the JSON it prints. It only imports the frameworks that are asked for.
"""

import json
import os
import subprocess
import sys
import sysconfig

# C++ standard per framework: MXNet's headers fail as C++20; torch 2.13 needs C++17 or newer.
_COMMON_CFLAGS = ["-O2", "-g0", "-fPIC", "-fvisibility=hidden"]


def _mxnet_module():
    import numpy

    # MXNet 1.9 still refers to numpy.bool, which numpy 1.24 removed.
    if not hasattr(numpy, "bool"):
        numpy.bool = bool
    import mxnet

    return mxnet


def torch_flags():
    import torch
    from torch.utils import cpp_extension

    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    lib_dir = cpp_extension.library_paths()[0]
    return {
        "version": torch.__version__,
        "include_dirs": cpp_extension.include_paths(),
        "defines": ["_GLIBCXX_USE_CXX11_ABI=%d" % abi, "TORCH_API_INCLUDE_EXTENSION_H"],
        # torch headers use a few C++20 spellings that C++17 accepts with a warning.
        "cflags": ["-std=c++17", "-Wno-c++20-extensions"] + _COMMON_CFLAGS,
        "library_dirs": [lib_dir],
        "libraries": ["c10", "torch_cpu"],
    }


def tensorflow_flags():
    import tensorflow as tf

    include_dirs, defines, cflags = [], [], []
    for flag in tf.sysconfig.get_compile_flags():
        if flag.startswith("-I"):
            include_dirs.append(flag[2:])
        elif flag.startswith("-D"):
            defines.append(flag[2:])
        elif "std=" not in flag:
            cflags.append(flag)
    library_dirs, libraries = [], []
    for flag in tf.sysconfig.get_link_flags():
        if flag.startswith("-L"):
            library_dirs.append(flag[2:])
        elif flag.startswith("-l"):
            libraries.append(flag[2:])
    return {
        "version": tf.__version__,
        "include_dirs": include_dirs,
        "defines": defines,
        "cflags": ["-std=c++17", "-Wno-deprecated-declarations", "-Wno-interference-size"]
        + cflags
        + _COMMON_CFLAGS,
        "library_dirs": library_dirs,
        "libraries": libraries,
    }


def mxnet_flags():
    mxnet = _mxnet_module()
    include = mxnet.libinfo.find_include_path()
    lib = mxnet.libinfo.find_lib_path()[0]
    return {
        "version": mxnet.__version__,
        "include_dirs": [include, os.path.join(include, "mkldnn")],
        "defines": [
            "_GLIBCXX_USE_CXX11_ABI=0",
            "MSHADOW_USE_CUDA=0",
            "MSHADOW_USE_MKL=0",
            "MSHADOW_USE_F16C=0",
            "MXNET_USE_MKLDNN=1",
        ],
        "cflags": ["-std=c++17"] + _COMMON_CFLAGS,
        "library_dirs": [os.path.dirname(lib)],
        "libraries": ["mxnet"],
    }


def mpi_flags():
    """Include and library directories of the system MPI, from its compiler wrapper."""

    def showme(what):
        try:
            out = subprocess.run(
                ["mpicc", "--showme:" + what], capture_output=True, text=True, check=True
            ).stdout
            return out.split()
        except (OSError, subprocess.CalledProcessError):
            return []

    return {"include_dirs": showme("incdirs"), "library_dirs": showme("libdirs")}


def python_flags():
    return {"include_dirs": [sysconfig.get_paths()["include"]], "executable": sys.executable}


FRAMEWORKS = {"torch": torch_flags, "tensorflow": tensorflow_flags, "mxnet": mxnet_flags}


def main(argv):
    """Prints {name: flags} as JSON for each name given (frameworks, 'mpi', 'python').
    A framework that fails to import is reported as {"error": ...} instead."""
    producers = dict(FRAMEWORKS, mpi=mpi_flags, python=python_flags)
    result = {}
    for name in argv:
        try:
            result[name] = producers[name]()
        except Exception as exc:  # reported to the caller, which decides
            result[name] = {"error": "%s: %s" % (type(exc).__name__, exc)}
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
