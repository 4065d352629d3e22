"""Facts that the docs state and the code decides must agree: the wire format version, the
core's rooms and what each uses, the source files the architecture page names, and the doc
sections that source comments point to."""

import ast
import glob
import os
import re

import pytest


def runfile(path):
    return os.path.join(os.environ.get("TEST_SRCDIR", ""), "tutti", path)


def read(path):
    with open(runfile(path)) as stream:
        return stream.read()


SRC = "common/src"


@pytest.fixture(scope="module")
def pages():
    found = {os.path.basename(p): open(p).read() for p in glob.glob(runfile("docs/*.md"))}
    assert "architecture.md" in found
    return found


def room_deps():
    tree = ast.parse(read(SRC + "/rooms.bzl"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "ROOM_DEPS":
            return ast.literal_eval(node.value)
    raise AssertionError("rooms.bzl defines no ROOM_DEPS")


def wire_version_mismatches(pages, version):
    """(page, number) for every "wire format version N" in `pages` with N != version."""
    return [(name, int(n)) for name, text in sorted(pages.items())
            for n in re.findall(r"[Ww]ire format version (\d+)", text) if int(n) != version]


def test_wire_format_version_in_the_docs_is_the_codes(pages):
    code = re.search(r"kWireVersion = (\d+);", read(SRC + "/negotiation/wire_format.cc"))
    assert code, "kWireVersion not found in wire_format.cc"
    version = int(code.group(1))
    assert "wire format version %d" % version in pages["architecture.md"]
    assert wire_version_mismatches(pages, version) == []


def test_a_stale_wire_format_version_is_reported():
    pages = {"a.md": "The wire format is versioned: wire format version 3.",
             "b.md": "Wire format version 4 carries it."}
    assert wire_version_mismatches(pages, 4) == [("a.md", 3)]


def test_rooms_table_matches_rooms_bzl(pages):
    rows = re.findall(r"^\| `(\w+)/` \| [^|]+ \| ([^|]+) \|$", pages["architecture.md"], re.M)
    table = {}
    for room, uses in rows:
        uses = uses.strip()
        table[room] = [] if uses == "the C ABI header" else sorted(
            u.strip() for u in uses.split(","))
    assert table == {room: sorted(deps) for room, deps in room_deps().items()}


def test_source_files_named_in_the_architecture_page_exist(pages):
    named = set(re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.(?:h|cc|bzl))`",
                           pages["architecture.md"]))
    assert named, "no source files found in the page"
    missing = [path for path in sorted(named)
               if not os.path.exists(runfile(SRC + "/" + path))
               and not os.path.exists(runfile(path))]
    assert missing == []


def test_doc_sections_that_sources_point_to_exist(pages):
    pointers = []
    for path in glob.glob(runfile(SRC + "/*/*.*")):
        text = open(path).read()
        comment = " ".join(line.strip().lstrip("/").strip() for line in text.splitlines()
                           if line.strip().startswith("//"))
        for page, section in re.findall(r'docs/([\w-]+\.md),? (?:section )?\(?"([^"]+)"',
                                        comment):
            pointers.append((os.path.relpath(path, runfile(SRC)), page, section))
    assert pointers, "no source points to a doc section"
    for source, page, section in pointers:
        assert page in pages, (source, page)
        headings = re.findall(r"^#+ (.+)$", pages[page], re.M)
        assert any(h.startswith(section) for h in headings), (source, page, section)
