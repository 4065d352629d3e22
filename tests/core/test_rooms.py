"""The core's layering (common/src/rooms.bzl): every #include in common/src names a header of
its own room, of a room listed as its dependency, or the C ABI. Bazel visibility enforces the
same table between targets; this check also catches an include that a transitive dependency
would let through."""

import ast
import os
import re

import pytest

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# The settings' ranges, compiled into base/config.cc and read by tuttirun as text.
SHARED_TEXT = {"../../python/tutti/common/settings.def"}


def runfile(path):
    return os.path.join(os.environ.get("TEST_SRCDIR", ""), "tutti", path)


def room_deps(bzl_text):
    """ROOM_DEPS from rooms.bzl (a plain dict literal)."""
    tree = ast.parse(bzl_text)
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "ROOM_DEPS":
            return ast.literal_eval(node.value)
    raise AssertionError("rooms.bzl defines no ROOM_DEPS")


def stray_includes(src_dir, deps):
    """'file: include' lines for every include that leaves the file's room undeclared."""
    stray = []
    for room in sorted(os.listdir(src_dir)):
        room_dir = os.path.join(src_dir, room)
        if not os.path.isdir(room_dir):
            continue
        for name in sorted(os.listdir(room_dir)):
            if not name.endswith((".h", ".cc")):
                continue
            with open(os.path.join(room_dir, name)) as stream:
                text = stream.read()
            for header in INCLUDE.findall(text):
                target = header.split("/")[0]
                if header in SHARED_TEXT:
                    continue
                allowed = target == "tutti" or (
                    room in deps and (target == room or target in deps[room]))
                if not allowed or ".." in header.split("/"):
                    stray.append("%s/%s: #include \"%s\" (room %s may include %s)" % (
                        room, name, header, room,
                        ", ".join([room] + deps.get(room, [])) or "nothing"))
    return stray


def cycle_in(deps):
    """A dependency cycle between rooms as a list of rooms, or None."""
    state = {}

    def visit(room, path):
        if state.get(room) == "open":
            return path[path.index(room):] + [room]
        if state.get(room) == "done":
            return None
        state[room] = "open"
        for used in deps.get(room, []):
            found = visit(used, path + [room])
            if found:
                return found
        state[room] = "done"
        return None

    for room in deps:
        found = visit(room, [])
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def deps():
    with open(runfile("common/src/rooms.bzl")) as stream:
        return room_deps(stream.read())


def test_every_include_stays_within_declared_rooms(deps):
    src = os.path.dirname(runfile("common/src/rooms.bzl"))
    assert stray_includes(src, deps) == []


def test_every_source_is_in_a_declared_room(deps):
    # Sources outside the rooms' packages (a new directory, a file directly in src/) reach
    # this test through //common/src:outside_rooms.
    src = os.path.dirname(runfile("common/src/rooms.bzl"))
    places = set()
    for root, _, files in os.walk(src):
        if any(name.endswith((".h", ".cc")) for name in files):
            places.add(os.path.relpath(root, src))
    assert places == set(deps)
    for room, used in deps.items():
        assert set(used) <= set(deps), room


def test_rooms_form_no_cycle(deps):
    assert cycle_in(deps) is None


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as stream:
        stream.write(text)


def test_an_include_across_an_undeclared_room_is_reported(tmp_path):
    deps = {"base": [], "transport": ["base"], "negotiation": ["base"]}
    write(str(tmp_path / "base" / "status.h"), "#pragma once\n")
    write(str(tmp_path / "transport" / "controller.h"), '#include "base/status.h"\n')
    write(str(tmp_path / "negotiation" / "plan.cc"),
          '#include "base/status.h"\n#include "transport/controller.h"\n')
    assert stray_includes(str(tmp_path), deps) == [
        'negotiation/plan.cc: #include "transport/controller.h" '
        "(room negotiation may include negotiation, base)"]


def test_a_relative_include_out_of_the_room_is_reported(tmp_path):
    deps = {"base": [], "shm": ["base"]}
    write(str(tmp_path / "shm" / "group.cc"), '#include "../transport/controller.h"\n')
    assert len(stray_includes(str(tmp_path), deps)) == 1


def test_a_cycle_between_rooms_is_found():
    assert cycle_in({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
