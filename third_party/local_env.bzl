"""Repository rule `local_env`: the project's virtual environment and system MPI, as Bazel targets.

Bazel 4 has no python_configure and must not download anything, so this rule runs the
project's Python (`.venv/bin/python`, or $TUTTI_PYTHON) on
common/python/tutti/common/build_flags.py with each plugin's recipe (frameworks/<fw>/build_flags.py)
— the same flag sources the pip builds use — and
turns its answer into cc_library targets (headers symlinked into this repository, so Bazel's
header checks see declared files), build_info.json files and a Python toolchain.
"""

_FRAMEWORKS = ["torch", "tensorflow", "mxnet"]

# The plugins' own compile recipes (build_flags.py beside each setup.py); a framework
# without one here is still known to tutti.common.build_flags by name.
_RECIPES = {
    "torch": "//frameworks/torch:build_flags.py",
    "tensorflow": "//frameworks/tensorflow:build_flags.py",
    "mxnet": "//frameworks/mxnet:build_flags.py",
}

def _starlark_list(values):
    return "[" + ", ".join(['"%s"' % v for v in values]) + "]"

def _python_interpreter(ctx, workspace):
    override = ctx.os.environ.get("TUTTI_PYTHON", "")
    python = ctx.path(override) if override else workspace.get_child(".venv").get_child("bin").get_child("python")
    if not python.exists:
        fail("local_env: no Python at %s; run tools/setup to create the project's .venv " % python +
             "(or set TUTTI_PYTHON to an interpreter that has the frameworks installed)")
    return python

def _symlinked_library(ctx, name, flags, libraries):
    """Symlinks the include directories under `name/` and returns a cc_library stanza."""
    includes = []
    for index, directory in enumerate(flags["include_dirs"]):
        link = "%s/include%d" % (name, index)
        ctx.symlink(directory, link)
        includes.append(link)
    linkopts = []
    for directory in flags.get("library_dirs", []):
        linkopts += ["-L" + directory, "-Wl,-rpath," + directory]
    linkopts += ["-l" + lib for lib in libraries]
    return """
cc_library(
    name = "{name}",
    hdrs = glob([{globs}], allow_empty = True),
    includes = {includes},
    defines = {defines},
    linkopts = {linkopts},
)
""".format(
        name = name,
        globs = ", ".join(['"%s/**"' % i for i in includes]),
        includes = _starlark_list(includes),
        defines = _starlark_list(flags.get("defines", [])),
        linkopts = _starlark_list(linkopts),
    )

def _local_env_impl(ctx):
    workspace = ctx.path(Label("//:WORKSPACE")).dirname
    python = _python_interpreter(ctx, workspace)
    script = ctx.path(Label("//common:python/tutti/common/build_flags.py"))
    arguments = [
        "%s=%s" % (framework, ctx.path(Label(_RECIPES[framework]))) if framework in _RECIPES else framework
        for framework in _FRAMEWORKS
    ]
    result = ctx.execute([python, script] + arguments + ["mpi", "python"], quiet = True, timeout = 300)
    if result.return_code != 0:
        fail("local_env: %s failed:\n%s" % (script, result.stderr))
    info = json.decode(result.stdout)

    build = [
        'load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")\n',
        'package(default_visibility = ["//visibility:public"])\n',
    ]
    copts = {}
    for framework in _FRAMEWORKS:
        flags = info[framework]
        if "error" in flags:
            fail("local_env: cannot import %s with %s: %s (run tools/setup)" % (framework, python, flags["error"]))
        build.append(_symlinked_library(ctx, framework, flags, flags["libraries"]))
        copts[framework] = [f for f in flags["cflags"] if not f.startswith("-std=")]
        ctx.file("%s_build_info.json" % framework, json.encode({
            "framework": framework,
            "framework_version": flags["version"],
            "core_version": "bazel",
            "c_api_version": 1,
        }))
    build.append(_symlinked_library(ctx, "mpi", info["mpi"], ["mpi"]))
    build.append(_symlinked_library(ctx, "python_headers", info["python"], []))
    build.append("""
exports_files(glob(["*_build_info.json"]))

py_runtime(
    name = "venv_python3",
    interpreter_path = "{python}",
    python_version = "PY3",
)

py_runtime_pair(
    name = "venv_runtime_pair",
    py3_runtime = ":venv_python3",
)

toolchain(
    name = "python_toolchain",
    toolchain = ":venv_runtime_pair",
    toolchain_type = "@bazel_tools//tools/python:toolchain_type",
)
""".format(python = python))
    ctx.file("BUILD", "\n".join(build))
    ctx.file("flags.bzl", "\n".join([
        '"""Framework-specific compiler options found by the local_env rule."""',
        "TORCH_COPTS = %s" % _starlark_list(copts["torch"]),
        "TENSORFLOW_COPTS = %s" % _starlark_list(copts["tensorflow"]),
        "MXNET_COPTS = %s" % _starlark_list(copts["mxnet"]),
        "PYTHON = \"%s\"" % python,
        "",
    ]))

local_env = repository_rule(
    implementation = _local_env_impl,
    environ = ["TUTTI_PYTHON"],
    local = True,
)
