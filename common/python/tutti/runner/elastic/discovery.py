"""Which hosts an elastic job may use: the discovery script's answer minus the blacklist."""

import random
import subprocess
import time

from .. import hosts
from ..errors import UsageError

DISCOVERY_TIMEOUT_SECONDS = 30


class DiscoveryError(RuntimeError):
    """The host discovery script failed or printed something that is not a host list."""


def parse_host_lines(text, default_slots, where):
    """`host` or `host:slots` per line (blank lines ignored) -> [Host]; DiscoveryError."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        at = "%s, line %d" % (where, number)
        name, sep, slots = line.partition(":")
        try:
            hosts._check_name(name, at)
            count = hosts._parse_slots(slots, at) if sep else default_slots
        except UsageError as exc:
            raise DiscoveryError(str(exc)) from None
        if any(h.name == name for h in found):
            raise DiscoveryError("%s: host %r is listed twice" % (where, name))
        found.append(hosts.Host(name, count))
    return found


class HostDiscovery:
    """Runs the user's discovery script (no arguments; its stdout lists the hosts)."""

    def __init__(self, script, default_slots):
        self.script = script
        self.default_slots = default_slots

    def find(self):
        where = "host discovery script %s" % self.script
        try:
            done = subprocess.run([self.script], stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=DISCOVERY_TIMEOUT_SECONDS)
        except OSError as exc:
            raise DiscoveryError("cannot run %s: %s" % (where, exc.strerror or exc)) from None
        except subprocess.TimeoutExpired:
            raise DiscoveryError("%s did not finish within %d s"
                                 % (where, DISCOVERY_TIMEOUT_SECONDS)) from None
        if done.returncode != 0:
            detail = done.stderr.strip().splitlines()[-1:] or ["no output on stderr"]
            raise DiscoveryError("%s exited with code %d (%s)"
                                 % (where, done.returncode, detail[0]))
        return parse_host_lines(done.stdout, self.default_slots, where)


class Blacklist:
    """Hosts whose workers failed. Without a cool-down range a host stays out for the rest
    of the job; with (low, high) it comes back after a random time in that range, doubled
    for each further failure (capped at `high` times 2**4)."""

    def __init__(self, cooldown_range=None, clock=time.monotonic):
        self._range = cooldown_range
        self._clock = clock
        self._until = {}     # host -> time it may return (inf: never)
        self._failures = {}  # host -> how often it was blacklisted

    def add(self, host):
        """Blacklists `host`; returns the cool-down in seconds (None: for good)."""
        count = self._failures.get(host, 0) + 1
        self._failures[host] = count
        if self._range is None:
            self._until[host] = float("inf")
            return None
        low, high = self._range
        seconds = random.uniform(low, high) * (2 ** min(count - 1, 4))
        self._until[host] = self._clock() + seconds
        return seconds

    def excluded(self, host):
        return self._clock() < self._until.get(host, 0.0)

    def returning(self):
        """Hosts whose cool-down ended since the last call."""
        now = self._clock()
        back = [h for h, until in self._until.items() if until <= now]
        for host in back:
            del self._until[host]
        return back
