"""`tuttirun --check-build`: which frameworks, controllers and tensor operations exist.

Frameworks count as available when their tutti plugin imports; each import runs in its
own subprocess (in parallel), so a broken framework cannot take the check down with it.
Controllers and operations come from the core through tutti.common; when the core is not
built, they show as unknown with the reason.
"""

import concurrent.futures
import importlib.util
import os
import re
import subprocess
import sys

FRAMEWORKS = (("TensorFlow", "tutti.tensorflow"), ("PyTorch", "tutti.torch"),
              ("MXNet", "tutti.mxnet"))
CONTROLLERS = (("MPI", "mpi_built"), ("Gloo", "gloo_built"))
OPERATIONS = (("NCCL", "nccl_built"), ("MPI", "mpi_built"), ("Gloo", "gloo_built"))

_IMPORT_TIMEOUT_SECONDS = 180


def _try_import(module):
    """(True, "") if `module` imports in a fresh interpreter, else (False, reason)."""
    if importlib.util.find_spec(module) is None:
        return False, "not installed"
    try:
        probe = subprocess.run([sys.executable, "-c", "import " + module],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True,
                               timeout=_IMPORT_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        return False, "import took more than %d s" % _IMPORT_TIMEOUT_SECONDS
    if probe.returncode == 0:
        return True, ""
    lines = [line for line in probe.stderr.strip().splitlines() if line.strip()]
    return False, lines[-1] if lines else "import failed with code %d" % probe.returncode


def core_version():
    """tutti-core's version, read from its source so that no core library is needed."""
    spec = importlib.util.find_spec("tutti.common")
    locations = (spec.submodule_search_locations or []) if spec else []
    for location in locations:
        for name in ("version.py", "__init__.py"):
            try:
                with open(os.path.join(location, name)) as handle:
                    match = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", handle.read(), re.M)
            except OSError:
                continue
            if match:
                return match.group(1)
    return "unknown"


def _core_facts():
    """({name: bool} from tutti.common, None) or (None, why the core is unavailable)."""
    try:
        import tutti.common as common
    except Exception as exc:  # ImportError, or OSError from a broken library
        return None, " ".join(str(exc).split()) or type(exc).__name__
    facts = {}
    for _, function in CONTROLLERS + OPERATIONS:
        try:
            facts[function] = bool(getattr(common, function)())
        except Exception:
            facts[function] = False
    if not facts["nccl_built"]:
        facts["nccl_reason"] = common.gpu_library_error("nccl").splitlines()[0]
    return facts, None


def _mark(flag):
    return {True: "[X]", False: "[ ]", None: "[?]"}[flag]


def report(verbose=False):
    """The --check-build text."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(FRAMEWORKS)) as pool:
        imports = list(pool.map(lambda item: _try_import(item[1]), FRAMEWORKS))
    facts, core_error = _core_facts()
    lines = ["tutti v%s:" % core_version(), "", "Available frameworks:"]
    for (name, module), (ok, reason) in zip(FRAMEWORKS, imports):
        note = "" if ok or not verbose else "  (%s: %s)" % (module, reason)
        lines.append("    %s %s%s" % (_mark(ok), name, note))
    for title, table in (("Available controllers:", CONTROLLERS),
                         ("Available tensor operations:", OPERATIONS)):
        lines += ["", title]
        for name, function in table:
            note = ""
            if verbose and facts and function == "nccl_built" and not facts[function]:
                note = "  (%s)" % facts["nccl_reason"]  # NCCL shows only when it loads
            lines.append("    %s %s%s" % (_mark(facts[function] if facts else None), name, note))
    if core_error:
        lines += ["", "[?]: unknown, the tutti core cannot be loaded: %s" % core_error]
    return "\n".join(lines) + "\n"


def main(verbose=False):
    sys.stdout.write(report(verbose))
    sys.stdout.flush()
    return 0
