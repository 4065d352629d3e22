"""tutti_plugin: the Bazel targets every framework plugin has.

Targets are named by their path inside the installed package, so the runfiles tree has the
same layout as a pip-installed plugin:
  python/tutti/<fw>/libtutti_<fw>_ops.so  the op library, linked to the core by its soname
                                          (libtutti_core.so.1; tutti.common loads it first)
  python/tutti/<fw>/build_info.json       what the library was built against, checked at import
  :tutti_<fw>                             the Python package with both as data
Each library is compiled with its framework's flags (MXNet's use the old libstdc++ ABI);
only C types cross to the core, so the ABI differences do not matter.
"""

def tutti_plugin(framework, copts):
    """Declares the op library, its build_info.json and the py_library of one plugin.

    Args:
      framework: "torch", "tensorflow" or "mxnet" (also the @local_env target name).
      copts: the framework's compiler options from @local_env//:flags.bzl.
    """
    package_dir = "python/tutti/%s" % framework
    library = "%s/libtutti_%s_ops.so" % (package_dir, framework)
    native.cc_binary(
        name = library,
        srcs = native.glob(["src/*.cc", "src/*.h"]) + [
            "//common:python/tutti/common/libtutti_core.so",
        ],
        copts = copts,
        linkshared = 1,
        deps = [
            "//common:c_api",
            "@local_env//:%s" % framework,
        ],
    )
    native.genrule(
        name = "build_info",
        srcs = ["@local_env//:%s_build_info.json" % framework],
        outs = ["%s/build_info.json" % package_dir],
        cmd = "cp $< $@",
    )
    native.py_library(
        name = "tutti_%s" % framework,
        srcs = native.glob(["%s/*.py" % package_dir]),
        data = [
            ":%s/build_info.json" % package_dir,
            ":" + library,
        ],
        imports = ["python"],
        deps = ["//common:tutti_common"],
    )
