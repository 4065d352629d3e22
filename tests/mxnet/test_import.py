"""import tutti.mxnet refuses, with a clear ImportError, an op library it cannot use."""

import importlib.util
import json
import os
import shutil
import sys

from launch import describe, run


def _package_dir():
    # find_spec locates tutti.mxnet without running it (which would import MXNet here).
    return os.path.dirname(importlib.util.find_spec("tutti.mxnet").origin)


def _copy_package(tmp_path):
    """A copy of tutti/mxnet under tmp_path/tutti/mxnet, found before the real one."""
    target = tmp_path / "tutti" / "mxnet"
    shutil.copytree(_package_dir(), target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def _import_from(tmp_path):
    code = "import tutti.mxnet"
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path)] + [p for p in sys.path if p])}
    return run([sys.executable, "-c", code], env=env, timeout=60)


def test_library_built_for_another_mxnet_version(tmp_path):
    package = _copy_package(tmp_path)
    info_path = package / "build_info.json"
    info = json.loads(info_path.read_text())
    info["framework_version"] = "1.8.0"
    info_path.write_text(json.dumps(info))

    result = _import_from(tmp_path)
    assert result.returncode != 0, describe(result)
    assert "ImportError" in result.stderr, describe(result)
    assert "built against mxnet 1.8.0" in result.stderr, describe(result)
    assert "pip install --no-build-isolation" in result.stderr, describe(result)


def test_missing_library(tmp_path):
    package = _copy_package(tmp_path)
    os.remove(package / "libtutti_mxnet_ops.so")

    result = _import_from(tmp_path)
    assert result.returncode != 0, describe(result)
    assert "ImportError" in result.stderr, describe(result)
    assert "libtutti_mxnet_ops.so" in result.stderr, describe(result)
