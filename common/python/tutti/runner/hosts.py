"""Hosts and slots: parsing -H / --hostfile, recognising this host, placing ranks.

Ranks fill the hosts in the order given, each up to its slot count. A host's position
among the hosts that received ranks is its cross rank; ranks on one host are numbered by
local rank.
"""

import collections
import concurrent.futures
import ipaddress
import re
import socket

from .errors import UsageError

Host = collections.namedtuple("Host", ["name", "slots"])

# One rank's place in the job.
Placement = collections.namedtuple(
    "Placement",
    ["rank", "size", "host", "local_rank", "local_size", "cross_rank", "cross_size", "is_local"],
)

_HOST_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
_RESOLVE_TIMEOUT_SECONDS = 10
# An IPv4 address range: 10.0.0.2-10.0.0.10, or 10.0.0.2-10 (the last number only).
_ADDRESS_RANGE = re.compile(r"^(\d+\.\d+\.\d+\.\d+)-(\d+(?:\.\d+\.\d+\.\d+)?)$")
MAX_RANGE_HOSTS = 4096


def _parse_slots(text, where):
    try:
        slots = int(text)
    except ValueError:
        raise UsageError("%s: slot count %r is not an integer" % (where, text)) from None
    if slots < 1:
        raise UsageError("%s: slot count must be at least 1, not %d" % (where, slots))
    return slots


def _check_name(name, where):
    if not name or not _HOST_NAME.match(name):
        raise UsageError("%s: %r is not a valid host name" % (where, name))


def _check_unique(hosts, where):
    seen = set()
    for host in hosts:
        if host.name in seen:
            raise UsageError("%s: host %r is listed twice" % (where, host.name))
        seen.add(host.name)
    return hosts


def expand_host_entry(entry, where):
    """`host`, `host:slots` or an IPv4 range `first-last[:slots]` as a list of entries.

    10.0.0.2-10.0.0.10 (or 10.0.0.2-10) stands for every address from the first to the
    last, both included, each with the entry's slot count.
    """
    name, sep, slots = entry.strip().partition(":")
    match = _ADDRESS_RANGE.match(name)
    if not match:
        return [entry.strip()]
    first_text, last_text = match.groups()
    if "." not in last_text:
        last_text = first_text.rsplit(".", 1)[0] + "." + last_text
    try:
        first = ipaddress.IPv4Address(first_text)
        last = ipaddress.IPv4Address(last_text)
    except ValueError as exc:
        raise UsageError("%s: address range %r: %s" % (where, name, exc)) from None
    count = int(last) - int(first) + 1
    if count < 1:
        raise UsageError("%s: address range %r runs backwards" % (where, name))
    if count > MAX_RANGE_HOSTS:
        raise UsageError("%s: address range %r holds %d addresses, more than %d"
                         % (where, name, count, MAX_RANGE_HOSTS))
    suffix = sep + slots
    return [str(first + i) + suffix for i in range(count)]


def parse_hosts_argument(text):
    """Parses -H: `host1:slots,host2:slots` (a host without `:slots` has one slot).

    Hosts are names or IPv4 addresses (an IPv6 address would be ambiguous with `:slots`).
    """
    where = "-H %s" % text
    if not text or not text.strip():
        raise UsageError("-H needs at least one host, e.g. -H host1:2,host2:2")
    hosts = []
    entries = []
    for entry in text.split(","):
        if not entry.strip():
            raise UsageError("%s: empty host entry (stray comma?)" % where)
        entries.extend(expand_host_entry(entry, where))
    for entry in entries:
        name, sep, slots = entry.partition(":")
        _check_name(name, where)
        if sep and ":" in slots:
            raise UsageError("%s: %r must be host or host:slots" % (where, entry))
        hosts.append(Host(name, _parse_slots(slots, where) if sep else 1))
    return _check_unique(hosts, where)


def parse_hostfile(path):
    """Parses a host file: one host per line as `host slots=N` or `host:N` or `host`.

    Blank lines and text after `#` are ignored.
    """
    try:
        with open(path) as handle:
            lines = handle.readlines()
    except OSError as exc:
        raise UsageError("cannot read host file %s: %s" % (path, exc.strerror or exc)) from None
    hosts = []
    for number, line in enumerate(lines, 1):
        where = "%s:%d" % (path, number)
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) > 2:
            raise UsageError("%s: expected `host slots=N`, got %r" % (where, line.strip()))
        name, sep, slots = fields[0].partition(":")
        _check_name(name, where)
        count = _parse_slots(slots, where) if sep else 1
        if len(fields) == 2:
            key, eq, value = fields[1].partition("=")
            if sep or key not in ("slots", "max_slots") or not eq:
                raise UsageError("%s: expected `host slots=N`, got %r" % (where, line.strip()))
            count = _parse_slots(value, where)
        hosts.append(Host(name, count))
    if not hosts:
        raise UsageError("host file %s lists no hosts" % path)
    return _check_unique(hosts, "host file %s" % path)


def _addresses(name):
    infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    return sorted({info[4][0] for info in infos})


def resolve_all(names, timeout=_RESOLVE_TIMEOUT_SECONDS):
    """Maps each host name to its addresses; UsageError naming the first that fails.

    Lookups run in parallel with a deadline (`timeout` seconds for each) so that a dead
    name server cannot hang us.
    """
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(16, max(1, len(names))))
    try:
        futures = {name: pool.submit(_addresses, name) for name in names}
        result = {}
        for name, future in futures.items():
            try:
                result[name] = future.result(timeout=timeout)
            except concurrent.futures.TimeoutError:
                raise UsageError("looking up host %r took more than %d s (--start-timeout)"
                                 % (name, timeout)) from None
            except (socket.gaierror, UnicodeError) as exc:
                reason = getattr(exc, "strerror", None) or str(exc)
                raise UsageError("unknown host %r (%s)" % (name, reason)) from None
        return result
    finally:
        pool.shutdown(wait=False)


def _is_own_address(address):
    """True when this machine owns `address` (binding to it succeeds)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((address, 0))
        return True
    except OSError:
        return False


def is_local(name, addresses):
    """Whether `name` (with its resolved `addresses`) is this machine."""
    # No getfqdn(): its reverse lookup can stall for seconds where DNS is broken.
    if name in ("localhost", socket.gethostname()):
        return True
    return any(_is_own_address(address) for address in addresses)


def place(np, hosts, addresses):
    """Assigns `np` ranks to `hosts` in order; UsageError when the slots do not suffice.

    `addresses` maps host names to their resolved addresses (see resolve_all).
    """
    total = sum(host.slots for host in hosts)
    if np > total:
        raise UsageError("-np %d asks for more processes than the %d slot%s the hosts provide "
                         "(%s)" % (np, total, "" if total == 1 else "s",
                                   ",".join("%s:%d" % h for h in hosts)))
    counts = []
    remaining = np
    for host in hosts:
        if remaining == 0:
            break
        take = min(host.slots, remaining)
        counts.append((host, take))
        remaining -= take
    placements = []
    rank = 0
    for cross_rank, (host, count) in enumerate(counts):
        local = is_local(host.name, addresses.get(host.name, ()))
        for local_rank in range(count):
            placements.append(Placement(rank, np, host.name, local_rank, count, cross_rank,
                                        len(counts), local))
            rank += 1
    return placements
