"""pytest_test: a py_test that runs pytest on its sources with the project's Python."""

def pytest_test(name, srcs, deps = [], data = [], size = "medium", tags = [], env = {}, **kwargs):
    """Runs pytest on `srcs`; a run that collects no test fails.

    Args:
      name: target name.
      srcs: test files, run by pytest in the order given.
      deps: py_library targets (tutti packages) the tests import.
      data: worker scripts and other files the tests read.
      size: Bazel test size (timeouts: small 60 s, medium 300 s, large 900 s).
      tags: Bazel tags.
      env: extra environment for the test.
      **kwargs: passed through to py_test.
    """
    native.py_test(
        name = name,
        srcs = srcs + ["//tests/support:pytest_main.py"],
        main = "//tests/support:pytest_main.py",
        args = ["$(rootpath %s)" % src for src in srcs],
        deps = deps + ["//tests/support"],
        data = data,
        size = size,
        tags = tags,
        env = env,
        # tutti is a namespace package: Bazel must not invent tutti/__init__.py files.
        legacy_create_init = False,
        python_version = "PY3",
        srcs_version = "PY3",
        **kwargs
    )
