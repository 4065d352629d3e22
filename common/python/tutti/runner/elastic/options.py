"""tuttirun's elastic flags (Horovod's names), added to the parser by options.py."""

from ..errors import UsageError

DEFAULT_ELASTIC_TIMEOUT_SECONDS = 600.0

DEFAULTS = {
    "min_np": None,
    "max_np": None,
    "host_discovery_script": None,
    "slots_per_host": 1,
    "elastic_timeout": DEFAULT_ELASTIC_TIMEOUT_SECONDS,
    "reset_limit": None,
    "blacklist_cooldown_range": None,
}


def _non_negative_int(text):
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise UsageError("%r is not an integer" % (text,)) from None
    if value < 0:
        raise UsageError("must be at least 0, not %d" % value)
    return value


def _positive_seconds(text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise UsageError("%r is not a number of seconds" % (text,)) from None
    if not value > 0:
        raise UsageError("must be more than 0 seconds, not %s" % text)
    return value


def add_arguments(parser, checked, positive_int):
    group = parser.add_argument_group(
        "elastic training (Gloo; the job re-forms when hosts come and go or workers fail)")
    group.add_argument("--min-np", type=checked(positive_int, "--min-np"), metavar="N",
                       help="fewest workers to train with (default: -np, else 1)")
    group.add_argument("--max-np", type=checked(positive_int, "--max-np"), metavar="N",
                       help="most workers to train with (default: every discovered slot)")
    group.add_argument("--host-discovery-script", metavar="SCRIPT",
                       help="executable printing the available hosts, one `host` or "
                            "`host:slots` per line; turns on elastic training")
    group.add_argument("--slots-per-host", type=checked(positive_int, "--slots-per-host"),
                       metavar="N", help="slots of a discovered host listed without :slots "
                                         "(default 1)")
    group.add_argument("--elastic-timeout", type=checked(_positive_seconds, "--elastic-timeout"),
                       metavar="S", help="how long the job may have fewer than --min-np "
                       "workers before it stops (default %g); a worker waits 30 s longer "
                       "for the next generation" % DEFAULT_ELASTIC_TIMEOUT_SECONDS)
    group.add_argument("--reset-limit", type=checked(_non_negative_int, "--reset-limit"),
                       metavar="N", help="stop the job when it would re-form more than N times "
                                         "(default: no limit)")
    group.add_argument("--blacklist-cooldown-range", nargs=2, metavar=("LOW", "HIGH"),
                       type=checked(_non_negative_int, "--blacklist-cooldown-range"),
                       help="a failing host returns after a random LOW..HIGH seconds, doubled "
                            "per further failure (default: it stays out)")


def check(merged):
    """UsageError for elastic flags without --host-discovery-script, or a bad range."""
    if merged.get("host_discovery_script"):
        cooldown = merged.get("blacklist_cooldown_range")
        if cooldown is not None:
            cooldown = tuple(int(v) for v in cooldown)
            if cooldown[0] > cooldown[1]:
                raise UsageError("--blacklist-cooldown-range %d %d: LOW is larger than HIGH"
                                 % cooldown)
            merged["blacklist_cooldown_range"] = cooldown
        return
    for dest, flag in (("min_np", "--min-np"), ("max_np", "--max-np"),
                       ("reset_limit", "--reset-limit"),
                       ("blacklist_cooldown_range", "--blacklist-cooldown-range")):
        if merged.get(dest) is not None:
            raise UsageError("%s needs --host-discovery-script (elastic training)" % flag)
