"""Checks shared by the engine tests: nothing left running, nothing left in /dev/shm."""

import contextlib
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


@contextlib.contextmanager
def nothing_left_behind(matching, what):
    """Around one test: afterwards no descendant that `matching` selects (`what` names
    them in the failure) is left running, and no new tutti segment is left in /dev/shm."""
    before = tutti_segments()
    yield
    left = wait_for_no_descendants(matching)
    assert not left, "%s left running: %s" % (what, left)
    assert segments_left(before) == set()


def assert_same_weights(expected, actual):
    assert sorted(expected) == sorted(actual)
    for name in expected:
        assert numpy.array_equal(expected[name], actual[name]), name


def _listening_sockets():
    """{socket inode: "address:port"} of every listening TCP socket on this machine."""
    found = {}
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            with open(table) as stream:
                lines = stream.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A":  # TCP_LISTEN
                continue
            address, port = fields[1].split(":")
            found[fields[9]] = (_decode_address(address, width), int(port, 16))
    return found


def _decode_address(text, width):
    raw = bytes.fromhex(text)
    # /proc prints each 32-bit word in host (little-endian) order.
    words = [raw[i:i + 4][::-1] for i in range(0, len(raw), 4)]
    packed = b"".join(words)
    if width == 8:
        return ".".join(str(b) for b in packed)
    if packed[:12] == b"\0" * 10 + b"\xff\xff":
        return ".".join(str(b) for b in packed[12:])  # IPv4-mapped
    return ":".join(packed[i:i + 2].hex() for i in range(0, 16, 2))


def listeners_beyond_loopback(root):
    """[(pid, command, address, port)] for sockets that `root` or its descendants listen on
    at any address other than 127.0.0.1 (nothing of a local job should)."""
    sockets = _listening_sockets()
    pids = dict(descendants(root))
    pids[root] = _command_line(root)
    found = []
    for pid, command in pids.items():
        for link in _fd_links(pid):
            if link.startswith("socket:["):
                inode = link[len("socket:["):-1]
                if inode in sockets and sockets[inode][0] != "127.0.0.1":
                    found.append((pid, command[:80]) + sockets[inode])
    return found


def _fd_links(pid):
    """What the open file descriptors of `pid` point at (those that vanish meanwhile,
    such as the one listing the directory, are skipped)."""
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return []
    links = []
    for fd in fds:
        try:
            links.append(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except OSError:
            pass
    return links
