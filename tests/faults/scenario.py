"""Marks a test as one scenario of the fault-injection suite.

Every scenario has an id; docs/fault-tolerance.md has one table row per id (what was tried,
what happened, how long it took), and test_table.py fails when the two lists differ.
Each scenario test prints "scenario <id>: <seconds> s" so a run shows the figures the table
reports.
"""

import functools
import time


def scenario(name):
    def wrap(test):
        @functools.wraps(test)
        def timed(*args, **kwargs):
            started = time.monotonic()
            try:
                return test(*args, **kwargs)
            finally:
                print("scenario %s: %.1f s" % (name, time.monotonic() - started))
        timed.scenario = name
        return timed
    return wrap
