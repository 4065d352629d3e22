"""Assertion helpers shared by the worker modules: every check is counted, and a failed one
raises AssertionError naming the rank."""

import tutti.tensorflow as hvd

checks = 0


def rank_label():
    return hvd.rank() if hvd.is_initialized() else "?"


def check(condition, message):
    global checks
    checks += 1
    if not condition:
        raise AssertionError("rank %s: %s" % (rank_label(), message))


def expect_error(error_type, function, *fragments):
    """Calls `function`, which must raise `error_type` whose message has every fragment;
    returns the message."""
    try:
        function()
    except error_type as error:
        message = getattr(error, "message", None) or str(error)
        for fragment in fragments:
            check(fragment in message, "%r is not in the error message: %s" % (fragment, message))
        return message
    check(False, "%s did not raise %s" % (function, error_type.__name__))
