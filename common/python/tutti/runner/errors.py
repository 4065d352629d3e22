"""Errors the launcher reports to its user."""


class UsageError(ValueError):
    """Bad input (flags, hosts, config file): tuttirun prints one line and exits with 2."""
