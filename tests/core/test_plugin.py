"""tutti.common.plugin and tutti.common.build: version checks, build_info.json checks, and
a real library compiled and linked against the core the way plugins are."""

import ctypes
import json
import os
import subprocess

import pytest

import tutti.common
from tutti.common import build, core, plugin
from tutti.common.compiler import CompileError, compile_shared_library

# A library that calls into the core, as every plugin's op library does.
PROBE_SOURCE = r"""
#include "tutti/c_api.h"
extern "C" __attribute__((visibility("default"))) int probe_c_api_version() {
  return tutti_c_api_version();
}
"""


@pytest.mark.parametrize("version, supported, expected", [
    ("0.1.0", ">=0.1,<0.2", True),
    ("0.1.7", ">=0.1,<0.2", True),
    ("0.2.0", ">=0.1,<0.2", False),
    ("0.0.9", ">=0.1,<0.2", False),
    ("1.0", "==1.0.0", True),
    ("0.1.3", "==0.1.*", True),
    ("0.2.0", "==0.1.*", False),
    ("2.13.0+cpu", ">2.12, !=2.13.1", True),
    ("0.1.0rc1", ">=0.1", True),
])
def test_version_in_range(version, supported, expected):
    assert plugin.version_in_range(version, supported) is expected


def test_unreadable_requirement_is_reported():
    with pytest.raises(ValueError, match="~=0.1"):
        plugin.version_in_range("0.1.0", "~=0.1")


def test_core_outside_the_supported_range_names_both_versions():
    plugin.check_core_version("tutti-torch", "0.1.0", ">=0.1,<0.2")
    with pytest.raises(ImportError) as info:
        plugin.check_core_version("tutti-torch", "0.1.0", ">=0.3,<0.4")
    assert str(info.value) == (
        "tutti-torch 0.1.0 supports tutti-core >=0.3,<0.4, but tutti-core %s is installed; "
        "install a matching tutti-core (pip install ./common)" % tutti.common.__version__)


def _package(tmp_path, lib_name="libtutti_demo_ops.so", **info):
    (tmp_path / lib_name).write_bytes(b"")
    content = {"framework": "demo", "framework_version": "1.2.3",
               "core_version": tutti.common.__version__, "c_api_version": core.C_API_VERSION}
    content.update(info)
    (tmp_path / "build_info.json").write_text(json.dumps(content))
    return str(tmp_path)


def test_load_native_library_returns_what_the_loader_returns(tmp_path):
    package = _package(tmp_path)
    loaded = plugin.load_native_library(package, "libtutti_demo_ops.so", "demo", "1.2.3",
                                        lambda path: ("loaded", path))
    assert loaded == ("loaded", os.path.join(package, "libtutti_demo_ops.so"))


def test_missing_library_says_how_to_build_it(tmp_path):
    with pytest.raises(ImportError, match=r"tutti.demo is not built: .*pip install "
                                          r"--no-build-isolation ./frameworks/demo"):
        plugin.load_native_library(str(tmp_path), "libtutti_demo_ops.so", "demo", "1.2.3", len)


def test_other_framework_version_asks_for_a_rebuild(tmp_path):
    package = _package(tmp_path, framework_version="2.12.0")
    with pytest.raises(ImportError) as info:
        plugin.load_native_library(package, "libtutti_demo_ops.so", "demo", "2.13.0", len)
    assert str(info.value) == (
        "tutti.demo was built against demo 2.12.0 but demo 2.13.0 is installed; rebuild it: "
        "pip install --no-build-isolation --force-reinstall ./frameworks/demo")


def test_other_c_api_version_asks_for_a_rebuild(tmp_path):
    package = _package(tmp_path, c_api_version=core.C_API_VERSION + 1)
    with pytest.raises(ImportError, match="C API version %d" % (core.C_API_VERSION + 1)):
        plugin.load_native_library(package, "libtutti_demo_ops.so", "demo", "1.2.3", len)


def test_corrupt_build_info_asks_for_a_rebuild(tmp_path):
    package = _package(tmp_path)
    (tmp_path / "build_info.json").write_text("{not json")
    with pytest.raises(ImportError, match="cannot read .*build_info.json"):
        plugin.load_native_library(package, "libtutti_demo_ops.so", "demo", "1.2.3", len)


def test_loader_failure_becomes_import_error(tmp_path):
    package = _package(tmp_path)  # an empty file is not a loadable library
    with pytest.raises(ImportError, match="loading .*libtutti_demo_ops.so failed"):
        plugin.load_native_library(package, "libtutti_demo_ops.so", "demo", "1.2.3", ctypes.CDLL)


def test_write_build_info_records_core_and_c_api(tmp_path):
    path = plugin.write_build_info(str(tmp_path), "demo", "1.2.3")
    assert json.loads(open(path).read()) == {
        "framework": "demo", "framework_version": "1.2.3",
        "core_version": tutti.common.__version__, "c_api_version": core.C_API_VERSION}


def test_packaged_header_matches_the_python_c_api_version():
    assert build.header_c_api_version(build.include_dir()) == core.C_API_VERSION


def test_library_linked_like_a_plugin_needs_the_core_soname_and_shares_it(tmp_path):
    source = tmp_path / "probe.cc"
    source.write_text(PROBE_SOURCE)
    output = str(tmp_path / "package" / "libprobe.so")
    compile_shared_library(
        [str(source)], output, str(tmp_path / "obj"), include_dirs=[build.include_dir()],
        cflags=["-std=c++17", "-O2", "-g0", "-fPIC", "-fvisibility=hidden"],
        ldflags=build.core_link_flags(), log=lambda line: None)
    dynamic = subprocess.run(["readelf", "-d", output], capture_output=True, text=True).stdout
    assert "[libtutti_core.so.1]" in dynamic, dynamic
    # The core is already loaded (RTLD_LOCAL) by tutti.common; the loader reuses it by soname.
    plugin.write_build_info(os.path.dirname(output), "demo", "1.2.3")
    probe = plugin.load_native_library(os.path.dirname(output), "libprobe.so", "demo", "1.2.3",
                                       ctypes.CDLL)
    assert probe.probe_c_api_version() == core.C_API_VERSION


def test_compile_error_shows_the_compiler_output(tmp_path):
    source = tmp_path / "broken.cc"
    source.write_text("this is not C++\n")
    with pytest.raises(CompileError, match="broken.cc"):
        compile_shared_library([str(source)], str(tmp_path / "libbroken.so"),
                               str(tmp_path / "obj"), log=lambda line: None)


def test_core_symbols_stay_out_of_the_global_namespace():
    # RTLD_LOCAL: a library that does not link the core must not see its symbols.
    assert not hasattr(ctypes.CDLL(None), "tutti_c_api_version")
    assert os.path.basename(core.library_path()) == "libtutti_core.so"
