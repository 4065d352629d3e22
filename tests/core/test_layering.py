"""The Python layering that docs/architecture.md describes, checked on the sources:
no import cycle (imports inside functions included), tutti.common imports no frontend,
frontends do not import each other, and every frontend's modules match the plugin-template
table. Reads the files only; nothing is imported."""

import ast
import os
import re

import pytest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", ""), "tutti")

# Package directories (relative to the runfiles root) of the packages checked here.
PACKAGES = {
    "tutti.common": "common/python/tutti/common",
    "tutti.numpy": "common/python/tutti/numpy",
    "tutti.mxnet": "frameworks/mxnet/python/tutti/mxnet",
    "tutti.tensorflow": "frameworks/tensorflow/python/tutti/tensorflow",
    "tutti.tensorflow.keras": "frameworks/tensorflow/python/tutti/tensorflow/keras",
    "tutti.torch": "frameworks/torch/python/tutti/torch",
}
FRONTENDS = {"numpy": "tutti.numpy", "tensorflow": "tutti.tensorflow", "mxnet": "tutti.mxnet",
             "torch": "tutti.torch"}


def modules():
    """Module name -> source path of every module of PACKAGES."""
    found = {}
    for package, directory in PACKAGES.items():
        path = os.path.join(RUNFILES, directory)
        for name in sorted(os.listdir(path)):
            if name.endswith(".py"):
                module = package if name == "__init__.py" else package + "." + name[:-3]
                found[module] = os.path.join(path, name)
    return found


def imports_of(module, path, known):
    """The modules of `known` that `module` imports anywhere in its file."""
    package = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
    targets = set()
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [base] + [base + "." + alias.name for alias in node.names]
        else:
            continue
        for name in names:
            # A submodule always imports its parent package first: not a cycle.
            if name in known and name != module and not module.startswith(name + "."):
                targets.add(name)
    return targets


def import_graph():
    known = modules()
    return {module: imports_of(module, path, known) for module, path in known.items()}


def cycles(graph):
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_imports_inside_functions():
    graph = import_graph()
    assert "tutti.common.lifecycle" in graph["tutti.common"]  # from .lifecycle import init
    assert "tutti.common.requests" in graph["tutti.common.lifecycle"]
    assert "tutti.tensorflow.sync_batch_norm" in graph["tutti.tensorflow"]  # in __getattr__


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_tutti_common_imports_no_frontend_and_frontends_not_each_other():
    for module, targets in import_graph().items():
        own = module.split(".")[1]
        for target in targets:
            other = target.split(".")[1]
            if own == "common":
                assert other == "common", "%s imports %s" % (module, target)
            else:
                assert other in ("common", own), "%s imports %s" % (module, target)


def template_rows():
    """module -> {frontend: cell} from the plugin-template table of docs/architecture.md."""
    text = open(os.path.join(RUNFILES, "docs/architecture.md")).read()
    section = text.split("## One plugin template")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    header = next(line for line in section.splitlines() if line.startswith("| module |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    table = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        if len(cells) != len(columns):
            continue  # the contracts table below it
        table[cells[0].strip("`")] = dict(zip(columns, cells))
    return table


@pytest.mark.parametrize("frontend", sorted(FRONTENDS))
def test_each_frontend_matches_the_plugin_template(frontend):
    package = FRONTENDS[frontend]
    table = template_rows()
    assert "requests.py" in table and "mpi_ops.py" in table
    present = {path.rsplit("/", 1)[1] for module, path in modules().items()
               if module.rsplit(".", 1)[0] == package}
    for module, row in table.items():
        cell = row[frontend]
        if cell == "yes":
            assert module in present, "%s has no %s (docs/architecture.md)" % (package, module)
        else:
            assert module not in present, "%s has %s, the table says %s" % (package, module,
                                                                             cell)
            owner = re.fullmatch(r"`(tutti\.common\.\w+)`", cell)
            if owner:
                assert owner.group(1) in modules(), cell
            else:
                assert cell == "—", cell
    unlisted = present - set(table) - {"__init__.py"}
    assert not unlisted, "%s modules missing from the table: %s" % (package, sorted(unlisted))
