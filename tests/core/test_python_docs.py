"""Facts docs/architecture.md states about tutti-core's Python side, checked against the code
that owns them, so the page cannot drift."""

import os
import re

from tutti.common import naming

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", ""), "tutti")


def read(path):
    with open(os.path.join(RUNFILES, path)) as stream:
        return stream.read()


def section(title):
    return read("docs/architecture.md").split("## " + title)[1].split("\n## ")[0]


def test_every_numeric_setting_is_in_the_environment_table():
    settings = re.findall(r"^TUTTI_SETTING\((\w+),",
                          read("common/python/tutti/common/settings.def"), re.M)
    assert len(settings) >= 10
    table = section("Environment contract")
    missing = [name for name in settings if "`TUTTI_%s`" % name not in table]
    assert not missing, "docs/architecture.md does not list %s" % missing


def test_the_documented_request_names_are_the_generated_ones():
    documented = re.search(r"names of unnamed requests: `([^`]+)`",
                           section("One plugin template")).group(1)
    # [<frontend>.]<kind>.noname.<n>[.set<id>] as a regular expression
    pattern = re.escape(documented)
    pattern = pattern.replace(r"\[<frontend>\.\]", r"(?:[a-z]+\.)?")
    pattern = pattern.replace("<kind>", "[a-z_]+").replace("<n>", r"\d+")
    pattern = pattern.replace(r"\[\.set<id>\]", r"(?:\.set\d+)?")
    naming.restart_numbering()
    try:
        for prefix, set_id in (("", 0), ("torch", 0), ("tf", 3), ("mxnet", 1)):
            name = naming.request_name(None, "grouped_allreduce", set_id, prefix=prefix)
            assert re.fullmatch(pattern, name), (documented, name)
    finally:
        naming.restart_numbering()

