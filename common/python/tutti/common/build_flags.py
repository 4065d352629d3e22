"""Compiler and linker flags for native libraries built against a framework.

One source of truth for both build paths: the plugins' builds (tutti.common.build) use it,
and Bazel's `local_env` repository rule runs it as a script and reads the JSON it prints.
Each framework's own flags are its plugin's recipe, a `build_flags.py` beside the plugin's
setup.py with a flags() function (tutti-torch, tutti-mxnet, tutti-tensorflow); this module adds the flags
every plugin shares (recipe_flags) and knows the system's MPI and Python. It only imports
the frameworks that are asked for, and nothing from tutti, so it runs before the core exists.
"""

import importlib.util
import json
import os
import subprocess
import sys
import sysconfig

# Every native library of tutti: optimised, position-independent, only C entry points visible.
COMMON_CFLAGS = ["-O2", "-g0", "-fPIC", "-fvisibility=hidden"]


def load_recipe(path):
    """The flags() function of the plugin recipe at `path` (a build_flags.py)."""
    name = "tutti_recipe_%s" % os.path.basename(os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    writes_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # leave no __pycache__ in the plugin's source tree
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = writes_bytecode
    return module.flags


def recipe_flags(recipe):
    """The flags a plugin library is compiled with: its recipe's, plus COMMON_CFLAGS."""
    flags = dict(recipe())
    flags["cflags"] = list(flags["cflags"]) + COMMON_CFLAGS
    return flags


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


def main(argv):
    """Prints {name: flags} as JSON for each argument: "mpi", "python", or
    "<framework>=<path of its plugin's build_flags.py>". A framework that fails to import
    (or comes without a recipe) is reported as {"error": ...} instead."""
    result = {}
    for argument in argv:
        name, _, path = argument.partition("=")
        try:
            if name == "mpi":
                result[name] = mpi_flags()
            elif name == "python":
                result[name] = python_flags()
            else:
                if not path:
                    raise ValueError("no recipe given for %r: pass %s=<path of its "
                                     "build_flags.py>" % (name, name))
                result[name] = recipe_flags(load_recipe(path))
        except Exception as exc:  # reported to the caller, which decides
            result[name] = {"error": "%s: %s" % (type(exc).__name__, exc)}
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    # Run as a script, this directory heads sys.path; its modules (requests.py, ...) must
    # not shadow the packages the frameworks import.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.exit(main(sys.argv[1:]))
