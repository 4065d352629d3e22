"""Checks a framework plugin runs at import time, before it touches its native library.

A plugin (tutti-torch, tutti-tensorflow, tutti-mxnet) is its own distribution with its own
version. Its native op library is compiled against one framework version and one C API
version, recorded in build_info.json next to the library. These checks turn every
mismatch into an ImportError that says what to install or rebuild, instead of a crash or
an undefined-symbol error.
"""

import json
import os
import re

from . import core

BUILD_INFO_NAME = "build_info.json"

_CLAUSE = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*([0-9][0-9A-Za-z.+*-]*)\s*$")


def _core_version():
    # Read at call time from the package, the one place the version is written.
    from . import __version__

    return __version__


def parse_version(text):
    """Numeric release tuple of a version string: "2.13.0+cpu" -> (2, 13, 0),
    "1.0rc1" -> (1, 0). Pre-release and local parts are ignored."""
    numbers = []
    for part in text.strip().split("+")[0].split("."):
        digits = re.match(r"\d+", part)
        if not digits:
            break
        numbers.append(int(digits.group()))
        if digits.end() != len(part):
            break  # "0rc1": the release ends here
    if not numbers:
        raise ValueError("not a version number: %r" % text)
    return tuple(numbers)


def _padded(a, b):
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)), b + (0,) * (width - len(b))


def _clause_holds(version, op, bound):
    if bound.endswith(".*"):  # ==0.1.* / !=0.1.*: compare the given prefix only
        if op not in ("==", "!="):
            raise ValueError("a wildcard version needs == or !=, got %s%s" % (op, bound))
        prefix = parse_version(bound[:-2])
        equal = version[: len(prefix)] + (0,) * (len(prefix) - len(version)) == prefix
        return equal if op == "==" else not equal
    left, right = _padded(version, parse_version(bound))
    return {
        ">=": left >= right,
        "<=": left <= right,
        ">": left > right,
        "<": left < right,
        "==": left == right,
        "!=": left != right,
    }[op]


def version_in_range(version, supported):
    """True if `version` satisfies every comma-separated clause of `supported`,
    e.g. version_in_range("0.1.3", ">=0.1,<0.2")."""
    parsed = parse_version(version)
    for clause in supported.split(","):
        if not clause.strip():
            continue
        match = _CLAUSE.match(clause)
        if not match:
            raise ValueError("cannot read version requirement %r in %r" % (clause, supported))
        if not _clause_holds(parsed, match.group(1), match.group(2)):
            return False
    return True


def check_core_version(plugin_name, plugin_version, supported):
    """Raises ImportError unless the installed tutti-core satisfies `supported`.

    plugin_name: distribution name, e.g. "tutti-torch"; supported: e.g. ">=0.1,<0.2".
    """
    core_version = _core_version()
    if not version_in_range(core_version, supported):
        raise ImportError(
            "%s %s supports tutti-core %s, but tutti-core %s is installed; install a "
            "matching tutti-core (pip install ./common)"
            % (plugin_name, plugin_version, supported, core_version)
        )


def _rebuild_hint(framework):
    return "pip install --no-build-isolation --force-reinstall ./frameworks/%s" % framework


def read_build_info(package_dir):
    """The parsed build_info.json of a plugin package directory."""
    path = os.path.join(package_dir, BUILD_INFO_NAME)
    with open(path) as stream:
        return json.load(stream)


def load_native_library(package_dir, lib_name, framework, running_version, loader):
    """Checks and loads a plugin's native op library; returns `loader(path)`.

    package_dir: the plugin package directory (holds `lib_name` and build_info.json);
    framework: "torch", "tensorflow" or "mxnet"; running_version: the version of the
    framework imported in this process; loader: the function that loads the library,
    e.g. torch.ops.load_library, tf.load_op_library or ctypes.CDLL.
    """
    module = "tutti.%s" % framework
    path = os.path.join(package_dir, lib_name)
    info_path = os.path.join(package_dir, BUILD_INFO_NAME)
    if not os.path.exists(path) or not os.path.exists(info_path):
        missing = path if not os.path.exists(path) else info_path
        raise ImportError(
            "%s is not built: %s does not exist. Build and install it with `pip install "
            "--no-build-isolation ./frameworks/%s` from the tutti source tree (after "
            "`pip install ./common`); to use the source tree itself, build it in place: "
            "`cd frameworks/%s && python setup.py build_ext --inplace`."
            % (module, missing, framework, framework)
        )
    try:
        info = read_build_info(package_dir)
        built_version = info["framework_version"]
        built_c_api = int(info["c_api_version"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ImportError(
            "%s: cannot read %s (%s); rebuild it: %s"
            % (module, info_path, exc, _rebuild_hint(framework))
        ) from exc
    if built_version != running_version:
        raise ImportError(
            "%s was built against %s %s but %s %s is installed; rebuild it: %s"
            % (module, framework, built_version, framework, running_version,
               _rebuild_hint(framework))
        )
    if built_c_api != core.C_API_VERSION:
        raise ImportError(
            "%s was built against tutti-core C API version %d (tutti-core %s) but the "
            "installed tutti-core %s has C API version %d; rebuild it: %s"
            % (module, built_c_api, info.get("core_version", "?"), _core_version(),
               core.C_API_VERSION, _rebuild_hint(framework))
        )
    try:
        return loader(path)
    except Exception as exc:
        raise ImportError(
            "%s: loading %s failed: %s. If tutti-core or %s changed since it was built, "
            "rebuild it: %s" % (module, path, exc, framework, _rebuild_hint(framework))
        ) from exc


def build_info(framework, framework_version, c_api_version=None):
    """The build_info.json content for a library built now against `framework_version`."""
    return {
        "framework": framework,
        "framework_version": framework_version,
        "core_version": _core_version(),
        "c_api_version": core.C_API_VERSION if c_api_version is None else c_api_version,
    }


def write_build_info(path, framework, framework_version, c_api_version=None):
    """Writes build_info.json; `path` is the file or the directory that receives it."""
    if os.path.isdir(path):
        path = os.path.join(path, BUILD_INFO_NAME)
    with open(path, "w") as stream:
        json.dump(build_info(framework, framework_version, c_api_version), stream, indent=2)
        stream.write("\n")
    return path
