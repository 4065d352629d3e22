"""docs/fault-tolerance.md lists exactly the scenarios this suite runs, one row each."""

import glob
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))


def _docs_path():
    runfiles = os.environ.get("TEST_SRCDIR")
    workspace = os.environ.get("TEST_WORKSPACE")
    if runfiles and workspace:
        return os.path.join(runfiles, workspace, "docs", "fault-tolerance.md")
    return os.path.join(HERE, os.pardir, os.pardir, "docs", "fault-tolerance.md")


def suite_scenarios():
    names = set()
    for path in glob.glob(os.path.join(HERE, "test_*.py")):
        with open(path) as handle:
            names.update(re.findall(r'@scenario\("([^"]+)"\)', handle.read()))
    return names


def table_scenarios():
    with open(_docs_path()) as handle:
        return re.findall(r"^\| `([^`]+)` \|", handle.read(), re.M)


def test_the_docs_table_lists_every_scenario_of_the_suite_once():
    rows = table_scenarios()
    suite = suite_scenarios()
    assert len(suite) >= 20, suite  # the suite's files were found
    assert sorted(set(rows)) == sorted(rows), "a scenario has two rows"
    assert set(rows) == suite, ("in the suite, not in the table: %s; in the table, not in "
                                "the suite: %s" % (sorted(suite - set(rows)),
                                                   sorted(set(rows) - suite)))


def test_every_row_says_what_happened_and_how_long_it_took():
    with open(_docs_path()) as handle:
        for line in handle:
            if line.startswith("| `"):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                assert len(cells) == 4 and all(cells), line
                assert re.search(r"\d+(\.\d+)?(-\d+)? s", cells[3]), line
