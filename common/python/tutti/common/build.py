"""setuptools support for framework plugins: compiles a plugin's native op library.

A plugin's setup.py needs only:

    from tutti.common.build import native_build_command

    build_ext = native_build_command(
        "mxnet", plugin_sources(HERE), "libtutti_mxnet_ops.so", "tutti.mxnet",
        recipe=os.path.join(HERE, "build_flags.py"))
    setup(..., ext_modules=build_ext.ext_modules, cmdclass={"build_ext": build_ext})

The library is compiled with the flags of the plugin's recipe (its build_flags.py) plus
those every plugin shares (tutti.common.build_flags), against the C ABI header shipped
with tutti-core, and linked against the installed core, so its
DT_NEEDED entry is the core's soname (libtutti_core.so.1). build_info.json, written next
to it, records what it was built against; tutti.common.plugin checks it at import time.
Plugins are installed with `pip install --no-build-isolation ./frameworks/<fw>`: the
build must see the framework and tutti-core that are installed, not fresh copies.
"""

import glob
import os
import re
import shutil

from setuptools import Extension
from setuptools.command.build_ext import build_ext

from . import build_flags, core, plugin
from .compiler import compile_shared_library

_HERE = os.path.dirname(os.path.abspath(__file__))


def include_dir():
    """Directory holding tutti/c_api.h: the copy installed with tutti-core, or the
    source tree's common/include when tutti.common is used from the source tree."""
    for candidate in (
        os.path.join(_HERE, "include"),
        os.path.join(_HERE, os.pardir, os.pardir, os.pardir, "include"),
    ):
        if os.path.exists(os.path.join(candidate, "tutti", "c_api.h")):
            return os.path.normpath(candidate)
    raise RuntimeError(
        "tutti/c_api.h was not found next to %s; reinstall tutti-core (pip install ./common)"
        % _HERE
    )


def header_c_api_version(include):
    """TUTTI_C_API_VERSION as defined by the c_api.h under `include`."""
    with open(os.path.join(include, "tutti", "c_api.h")) as stream:
        match = re.search(r"#define\s+TUTTI_C_API_VERSION\s+(\d+)", stream.read())
    if not match:
        raise RuntimeError("TUTTI_C_API_VERSION is not defined in %s" % include)
    return int(match.group(1))


def plugin_sources(plugin_dir):
    """The C++ files of a plugin's op library, relative to `plugin_dir`: every src/*.cc,
    the same rule as frameworks/plugin.bzl, so pip and Bazel always compile the same files."""
    found = glob.glob(os.path.join(plugin_dir, "src", "*.cc"))
    if not found:
        raise RuntimeError("no C++ sources under %s" % os.path.join(plugin_dir, "src"))
    return sorted(os.path.relpath(path, plugin_dir) for path in found)


def core_link_flags():
    """Linker flags that make a library depend on the installed core by its soname."""
    return ["-L" + os.path.dirname(core.library_path()), "-l:" + core.LIBRARY_NAME]


def native_build_command(
    framework,
    sources,
    lib_name,
    package,
    extra_include_dirs=(),
    extra_defines=(),
    extra_cflags=(),
    extra_ldflags=(),
    jobs=2,
    recipe=None,
):
    """A build_ext command class that builds `lib_name` into `package` from `sources`.

    framework: the framework's name ("mxnet"), recorded in build_info.json;
    sources: C++ files relative to the setup.py directory;
    recipe: path of the plugin's build_flags.py, whose flags() gives the framework's
    compile and link flags.
    The class attribute `ext_modules` holds the Extension to pass to setup(), which also
    makes the wheel platform-specific.
    """
    if recipe is None:
        raise ValueError(
            "no build recipe for framework %r: pass recipe=<path of the plugin's "
            "build_flags.py>" % (framework,)
        )
    stem = lib_name[: -len(".so")] if lib_name.endswith(".so") else lib_name
    extension = Extension("%s.%s" % (package, stem), sources=list(sources))

    class BuildNativeLibrary(build_ext):
        description = "build the %s native op library %s" % (framework, lib_name)
        ext_modules = [extension]

        def get_ext_filename(self, fullname):
            parts = fullname.split(".")
            if parts[-1] == stem:
                return os.path.join(*(parts[:-1] + [lib_name]))
            return super().get_ext_filename(fullname)

        def build_extension(self, ext):
            if ext is not extension:
                return super().build_extension(ext)
            flags = build_flags.recipe_flags(build_flags.load_recipe(recipe))
            include = include_dir()
            # setuptools builds into build_lib even for --inplace, then copies to the source.
            output = os.path.abspath(self.get_ext_fullpath(ext.name))
            compile_shared_library(
                ext.sources,
                output,
                build_temp=os.path.join(self.build_temp, stem),
                include_dirs=[include] + list(extra_include_dirs) + flags["include_dirs"],
                defines=flags["defines"] + list(extra_defines),
                cflags=flags["cflags"] + list(extra_cflags),
                library_dirs=flags["library_dirs"],
                libraries=flags["libraries"],
                ldflags=core_link_flags() + list(extra_ldflags),
                jobs=jobs,
            )
            plugin.write_build_info(
                os.path.dirname(output), framework, flags["version"],
                c_api_version=header_c_api_version(include),
            )

        def copy_extensions_to_source(self):
            super().copy_extensions_to_source()
            build_py = self.get_finalized_command("build_py")
            target = build_py.get_package_dir(package)
            built = os.path.join(self.build_lib, *package.split("."))
            shutil.copyfile(
                os.path.join(built, plugin.BUILD_INFO_NAME),
                os.path.join(target, plugin.BUILD_INFO_NAME),
            )

    BuildNativeLibrary.__name__ = "BuildNativeLibrary_%s" % framework
    return BuildNativeLibrary
