"""tutti-core: the shared native core (libtutti_core.so), tutti.common, tutti.numpy and the
tuttirun launcher.

    pip install ./common

The core is compiled with g++ from src/<room>/*.cc and linked against the system MPI and Gloo
(Debian: openmpi-bin libopenmpi-dev libgloo-dev).
"""

import glob
import importlib.util
import os
import re
import shutil

from setuptools import Extension, find_namespace_packages, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DIR = os.path.join("python", "tutti", "common")
CORE_SONAME = "libtutti_core.so.1"


def _module_from(path, name):
    # Load by file path: importing the tutti.common package would load the core library,
    # which is what this script builds.
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _version():
    with open(os.path.join(HERE, PACKAGE_DIR, "__init__.py")) as stream:
        return re.search(r'__version__ = "([^"]+)"', stream.read()).group(1)


# Keep in step with GPU_COPTS in common/BUILD.
GPU_WARNING_FLAGS = ["-Wall", "-Wextra", "-Werror"]


class BuildCore(build_ext):
    """Compiles src/*/*.cc into tutti/common/libtutti_core.so; the CPython module
    tutti.common._host_requests is a plain extension (Python's headers and the C ABI's)."""

    def get_ext_filename(self, fullname):
        parts = fullname.split(".")
        if parts[-1] == "libtutti_core":
            return os.path.join(*(parts[:-1] + ["libtutti_core.so"]))
        return super().get_ext_filename(fullname)

    def build_extension(self, ext):
        if ext.name != "tutti.common.libtutti_core":
            return super().build_extension(ext)
        compiler = _module_from(os.path.join(PACKAGE_DIR, "compiler.py"), "tutti_compiler")
        flags = _module_from(os.path.join(PACKAGE_DIR, "build_flags.py"), "tutti_build_flags")
        mpi = flags.mpi_flags()
        compiler.compile_shared_library(
            ext.sources,
            os.path.abspath(self.get_ext_fullpath(ext.name)),
            build_temp=os.path.join(self.build_temp, "core"),
            include_dirs=["include", "src"] + mpi["include_dirs"],
            # Only MPI's C API is linked: keep mpi.h from pulling in the C++ bindings.
            defines=["OMPI_SKIP_MPICXX", "MPICH_SKIP_MPICXX"],
            cflags=["-std=c++17", "-O2", "-g0", "-fPIC", "-fvisibility=hidden",
                    "-fvect-cost-model=dynamic"],
            # -Bsymbolic: the core's own Gloo and C++ symbols must bind inside the core
            # even when another library in the process (torch) exports the same names;
            # -z now binds the rest at load time, before a later RTLD_GLOBAL library could
            # interpose. --no-undefined: a missing symbol fails the build, not the import.
            # The version script exports only the tutti_* C functions.
            ldflags=[
                "-Wl,-soname," + CORE_SONAME,
                "-Wl,-Bsymbolic",
                "-Wl,-z,now",
                "-Wl,--no-undefined",
                "-Wl,--version-script=" + os.path.join("src", "api", "exports.lds"),
            ],
            library_dirs=mpi["library_dirs"],
            libraries=["mpi", "gloo", "pthread", "dl"],
            jobs=2,
            # The device code (src/gpu) is held to warnings as errors, as in the Bazel build.
            source_cflags=lambda source: GPU_WARNING_FLAGS if "gpu" + os.sep in source else [],
        )


class BuildPy(build_py):
    """Also ships include/tutti/c_api.h as tutti/common/include/tutti/c_api.h, so plugins
    compile against the header of the core they link."""

    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "tutti", "common", "include", "tutti")
        os.makedirs(target, exist_ok=True)
        header = os.path.join("include", "tutti", "c_api.h")
        shutil.copyfile(header, os.path.join(target, "c_api.h"))


def _long_description():
    with open(os.path.join(HERE, "README.md")) as stream:
        return stream.read()


setup(
    name="tutti-core",
    version=_version(),
    description="Shared native core of tutti, a distributed deep-learning training framework",
    long_description=_long_description(),
    long_description_content_type="text/markdown",
    python_requires=">=3.8",
    package_dir={"": "python"},
    packages=find_namespace_packages(where="python", include=["tutti.*"]),
    include_package_data=False,
    # The settings' ranges: read by tuttirun at run time, compiled into the core.
    package_data={"tutti.common": ["settings.def"]},
    ext_modules=[
        Extension("tutti.common.libtutti_core", sources=sorted(glob.glob("src/*/*.cc"))),
        Extension("tutti.common._host_requests", sources=["python_entry/host_requests.cc"],
                  include_dirs=["include"], extra_compile_args=["-std=c++17", "-g0"],
                  language="c++"),
    ],
    cmdclass={"build_ext": BuildCore, "build_py": BuildPy},
    install_requires=["numpy", "pyyaml", "cloudpickle"],
    # tutti.ray and tutti.spark import their engine only when used.
    extras_require={"ray": ["ray[default]>=2.60"], "spark": ["pyspark>=4.3"]},
    entry_points={"console_scripts": ["tuttirun = tutti.runner.launch:main"]},
    zip_safe=False,
)
