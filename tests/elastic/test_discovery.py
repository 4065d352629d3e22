"""The elastic driver's host discovery parsing and blacklist (no processes needed)."""

import pytest

from tutti.runner.elastic.discovery import Blacklist, DiscoveryError, parse_host_lines
from tutti.runner.hosts import Host


def test_host_lines_take_default_slots():
    assert parse_host_lines("a:2\n\nb\n", 4, "script") == [Host("a", 2), Host("b", 4)]


@pytest.mark.parametrize("text, message", [
    ("a:0\n", "script, line 1: slot count must be at least 1, not 0"),
    ("a,b\n", "script, line 1: 'a,b' is not a valid host name"),
    ("a:2:3\n", "script, line 1: slot count '2:3' is not an integer"),
    ("a\na:2\n", "script: host 'a' is listed twice"),
    ("bad host\n", "script, line 1: 'bad host' is not a valid host name"),
])
def test_bad_host_lines_are_named(text, message):
    with pytest.raises(DiscoveryError) as error:
        parse_host_lines(text, 1, "script")
    assert str(error.value) == message


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_blacklist_without_cooldown_is_for_good():
    clock = Clock()
    blacklist = Blacklist(None, clock)
    assert blacklist.add("h") is None
    clock.now += 1e6
    assert blacklist.excluded("h") and blacklist.returning() == []


def test_blacklist_cooldown_doubles_per_failure():
    clock = Clock()
    blacklist = Blacklist((2, 2), clock)
    assert blacklist.add("h") == 2.0
    assert blacklist.excluded("h")
    clock.now += 2.0
    assert not blacklist.excluded("h") and blacklist.returning() == ["h"]
    assert blacklist.add("h") == 4.0
    clock.now += 3.9
    assert blacklist.excluded("h")
