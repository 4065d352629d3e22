"""The ranges of the core's numeric settings, read from the table the core is compiled with
(tutti/common/settings.def), so tuttirun refuses exactly the values the core would refuse,
before any rank starts."""

import collections
import functools
import importlib.util
import math
import os
import re

from .errors import UsageError

Range = collections.namedtuple("Range", ["name", "integer", "min", "max", "unit"])

_ROW = re.compile(r'^TUTTI_SETTING\((\w+),\s*(INTEGER|NUMBER),\s*([^,\s]+),\s*([^,\s]+),'
                  r'\s*"([^"]*)"\)\s*$')


def _table_path():
    spec = importlib.util.find_spec("tutti.common")  # located, not imported (no core load)
    for directory in spec.submodule_search_locations:
        path = os.path.join(directory, "settings.def")
        if os.path.exists(path):
            return path
    raise RuntimeError("tutti-core is incomplete: tutti/common/settings.def is missing")


@functools.lru_cache(maxsize=None)
def table():
    """name (without TUTTI_) -> Range, in the table's order."""
    rows = collections.OrderedDict()
    with open(_table_path()) as handle:
        for line in handle:
            match = _ROW.match(line.strip())
            if match:
                name, kind, low, high, unit = match.groups()
                rows[name] = Range(name, kind == "INTEGER", float(low), float(high), unit)
    return rows


def _number(text):
    """A float, or None for anything that is not one (int(2**70) and 1e400 included)."""
    try:
        return float(text)
    except (TypeError, ValueError, OverflowError):
        return None


def _describe(entry, scale, unit):
    low, high = entry.min / scale, entry.max / scale
    kind = "an integer" if entry.integer else "a number"
    return "%s from %s to %s%s" % (kind, _format(low), _format(high),
                                   " (%s)" % unit if unit else "")


def _format(value):
    return "%d" % value if value == int(value) and abs(value) < 1e15 else "%g" % value


def check(name, text, scale=1.0, unit=None):
    """The value of setting `name` given as `text` in units of 1/`scale` of the table's
    (e.g. MiB for a table in bytes); UsageError naming the range when it is outside."""
    entry = table()[name]
    unit = entry.unit if unit is None else unit
    value = _number(text)
    if entry.integer:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise UsageError("%r is not an integer" % (text,)) from None
    elif value is None:
        raise UsageError("%r is not a number" % (text,))
    if not (math.isfinite(value) and entry.min <= value * scale <= entry.max):
        raise UsageError("%s is out of range: it must be %s" % (text, _describe(entry, scale, unit)))
    return value


def converter(name, scale=1.0, unit=None):
    """An argparse type for a flag that sets setting `name`."""
    def convert(text):
        return check(name, text, scale, unit)
    convert.__name__ = name.lower()
    return convert


def check_environment(environ, overridden=()):
    """UsageError for the first TUTTI_*/HOROVOD_* variable in `environ` whose value the core
    would refuse (the one the core reads: TUTTI_ before HOROVOD_). Variables in
    `overridden` (set by flags) are skipped."""
    for name in table():
        for variable in ("TUTTI_" + name, "HOROVOD_" + name):
            text = environ.get(variable)
            if not text:
                continue
            if variable not in overridden and "TUTTI_" + name not in overridden:
                try:
                    check(name, text)
                except UsageError as exc:
                    raise UsageError("environment variable %s=%s" % (variable, exc)) from None
            break
