"""Compiles C++ sources into a shared library with g++ (or $CXX).

Used by tutti-core's own setup.py and by the plugins' builds (through tutti.common.build).
It imports nothing from tutti, so common/setup.py can load it by path before the core
library exists.
"""

import concurrent.futures
import os
import shlex
import subprocess


class CompileError(RuntimeError):
    """A compiler or linker command failed; the message holds the command and its output."""


def _run(command, log):
    log(" ".join(shlex.quote(part) for part in command))
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        raise CompileError(
            "command failed with exit status %d:\n%s\n%s"
            % (result.returncode, " ".join(shlex.quote(p) for p in command), result.stdout)
        )
    if result.stdout.strip():
        log(result.stdout.rstrip())


def _object_path(source, build_temp):
    stem = os.path.splitext(os.path.normpath(source))[0].strip(os.sep).replace(os.sep, "_")
    return os.path.join(build_temp, stem.replace("..", "up") + ".o")


def compile_shared_library(
    sources,
    output,
    build_temp,
    include_dirs=(),
    defines=(),
    cflags=(),
    library_dirs=(),
    libraries=(),
    ldflags=(),
    jobs=2,
    log=print,
    source_cflags=None,
):
    """Compiles `sources` (in parallel, `jobs` at a time) and links them into `output`.

    source_cflags(source) may return extra flags for one source (e.g. -Werror for some).

    defines are "NAME" or "NAME=VALUE"; libraries are names for -l (":libx.so.1" works too);
    ldflags go to the link command before the libraries. Returns `output`.
    """
    compiler = os.environ.get("CXX", "g++")
    jobs = int(os.environ.get("TUTTI_BUILD_JOBS", jobs))  # more cores than the default 2
    os.makedirs(build_temp, exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    flags = list(cflags) + ["-D" + d for d in defines] + ["-I" + d for d in include_dirs]
    objects = [_object_path(source, build_temp) for source in sources]
    commands = [
        [compiler] + flags + list(source_cflags(source) if source_cflags else [])
        + ["-c", source, "-o", obj]
        for source, obj in zip(sources, objects)
    ]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for future in [pool.submit(_run, command, log) for command in commands]:
            future.result()  # re-raises the first CompileError
    # Link beside the target and rename over it: a process that has the old library loaded
    # keeps its mapping instead of crashing on a file rewritten under it.
    partial = "%s.partial-%d" % (output, os.getpid())
    link = (
        [compiler, "-shared", "-o", partial]
        + objects
        + list(ldflags)
        + ["-L" + d for d in library_dirs]
        + ["-l" + lib for lib in libraries]
    )
    try:
        _run(link, log)
        os.replace(partial, output)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    return output
