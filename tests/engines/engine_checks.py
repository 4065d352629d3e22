"""Checks shared by the engine tests: nothing left running, nothing left in /dev/shm."""

import os
import time

import numpy


def tutti_segments():
    return {name for name in os.listdir("/dev/shm") if name.startswith("tutti-")}


def segments_left(before, timeout=10):
    """tutti segments in /dev/shm that were not in `before` and are still there after up to
    `timeout` seconds. /dev/shm belongs to the whole machine: another job's segment may be
    there for a moment (each lives only until all its ranks have mapped it); a leaked one
    stays."""
    deadline = time.monotonic() + timeout
    while True:
        left = tutti_segments() - set(before)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def _parent(pid):
    try:
        with open("/proc/%d/stat" % pid) as stream:
            # The command name may contain spaces and parentheses: split after the last ')'.
            return int(stream.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _command_line(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as stream:
            return stream.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def descendants(root=None):
    """{pid: command line} of every live process below `root` (default: this one)."""
    root = os.getpid() if root is None else root
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = _parent(int(entry))
            if parent is not None:
                parents[int(entry)] = parent
    found = {}
    for pid in parents:
        ancestor = parents.get(pid)
        while ancestor is not None and ancestor != root:
            ancestor = parents.get(ancestor)
        if ancestor == root and _is_alive(pid):
            found[pid] = _command_line(pid)
    return found


def _is_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as stream:
            state = stream.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return False


def wait_until_gone(pids, timeout=15):
    """The subset of `pids` still alive (not zombies) after up to `timeout` seconds."""
    deadline = time.monotonic() + timeout
    alive = [pid for pid in pids if _is_alive(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [pid for pid in alive if _is_alive(pid)]
    return alive


def wait_for_no_descendants(matching=lambda command: True, timeout=15):
    """{pid: command} of this process's descendants that `matching` selects, still alive
    after up to `timeout` seconds (empty when they all went away)."""
    deadline = time.monotonic() + timeout
    while True:
        left = {pid: cmd for pid, cmd in descendants().items() if matching(cmd)}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def assert_same_weights(expected, actual):
    assert sorted(expected) == sorted(actual)
    for name in expected:
        assert numpy.array_equal(expected[name], actual[name]), name
