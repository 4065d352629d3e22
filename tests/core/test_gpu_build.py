"""The GPU support of tutti-core on a machine without a GPU: the restated CUDA/NCCL values
match the real headers, and libcudart/libnccl are found (or explained) at run time."""

import glob
import os
import subprocess
import sys

import pytest

import launch

CUDA_INCLUDE = "/usr/local/cuda/include"


def runfile(path):
    return os.path.join(os.environ.get("TEST_SRCDIR", ""), "tutti", path)


def nccl_include():
    from tutti.common import gpu_libraries

    for lib in gpu_libraries.nvidia_library_dirs():
        include = os.path.join(os.path.dirname(lib), "include")
        if os.path.exists(os.path.join(include, "nccl.h")):
            return include
    return None


def test_restated_values_match_the_real_headers(tmp_path):
    include = nccl_include()
    if not os.path.exists(os.path.join(CUDA_INCLUDE, "cuda_runtime_api.h")) or include is None:
        pytest.skip("needs the CUDA headers in /usr/local/cuda and pip nvidia-nccl-cu13")
    check = runfile("common/tests/gpu/cuda_decls_check.cc")
    src = os.path.dirname(os.path.dirname(runfile("common/src/gpu/cuda_decls.h")))
    result = subprocess.run(
        ["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror",
         "-Wno-enum-compare",  # comparing the two enums is the point
         "-I" + CUDA_INCLUDE, "-I" + include,
         "-I" + src, "-fsyntax-only", check],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert result.returncode == 0, result.stdout


def probe(env):
    """cuda_built(), nccl_built() and the reasons, from a fresh interpreter."""
    code = ("import json, tutti.common as c; print(json.dumps([c.cuda_built(), c.nccl_built(), "
            "c.gpu_library_error('cuda'), c.gpu_library_error('nccl')]))")
    result = launch.run([sys.executable, "-c", code], env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    import json

    return json.loads(result.stdout.strip().splitlines()[-1])


def test_missing_libraries_are_reported_not_fatal():
    cuda, nccl, cuda_error, nccl_error = probe({
        "TUTTI_CUDART_LIBRARY": "/nonexistent/libcudart.so.13",
        "TUTTI_NCCL_LIBRARY": "/nonexistent/libnccl.so.2",
    })
    assert (cuda, nccl) == (False, False)
    assert cuda_error.startswith("cannot load the CUDA runtime (libcudart); tried:\n"
                                 "  /nonexistent/libcudart.so.13: ")
    assert "set TUTTI_CUDART_LIBRARY to the library's path" in cuda_error
    assert nccl_error.startswith("cannot load NCCL (libnccl); tried:\n  /nonexistent/libnccl.so.2")
    assert "pip install nvidia-nccl-cu13" in nccl_error


def test_nccl_from_the_pip_package_loads():
    if nccl_include() is None:
        pytest.skip("pip nvidia-nccl-cu13 is not installed (tools/setup installs it)")
    # tutti.common puts the nvidia-* lib directories on TUTTI_GPU_LIBRARY_PATH itself.
    cuda, nccl, _, nccl_error = probe({"TUTTI_GPU_LIBRARY_PATH": ""})
    assert nccl is True, nccl_error
    assert nccl_error == ""


def test_search_path_lists_nvidia_package_lib_directories(tmp_path):
    from tutti.common import gpu_libraries

    for package in ("nccl", "cu13"):
        (tmp_path / "nvidia" / package / "lib").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    assert gpu_libraries.nvidia_library_dirs([str(tmp_path), "/nonexistent"]) == [
        str(tmp_path / "nvidia" / "cu13" / "lib"), str(tmp_path / "nvidia" / "nccl" / "lib")]
    environ = {"TUTTI_GPU_LIBRARY_PATH": "/mine"}
    gpu_libraries.export_search_path(environ)
    assert environ["TUTTI_GPU_LIBRARY_PATH"].split(":")[0] == "/mine"
