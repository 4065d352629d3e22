"""The worker side of tutti.runner.run: `python -m tutti.runner.task_worker`.

Fetches (fn, args, kwargs) from the launcher's store, calls fn, and stores either
("ok", result) or ("error", summary, traceback text, the exception if it pickles) under
run/result/<rank>. Exits 1 when fn raised, so that the launcher stops the other ranks.
"""

import os
import sys
import traceback

from . import serialization
from .store_client import StoreClient

FUNCTION_KEY = "run/fn"
RESULT_KEY = "run/result/%d"

_RANK_VARIABLES = ("TUTTI_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")


def rank_from_environment(environ):
    for name in _RANK_VARIABLES:
        value = environ.get(name, "")
        if value.isdigit():
            return int(value)
    raise RuntimeError("no rank in the environment (%s); start this module through "
                       "tutti.runner.run" % ", ".join(_RANK_VARIABLES))


def _error_record(exc):
    summary = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    text = traceback.format_exc()
    try:
        exception = serialization.dumps(exc)
        serialization.loads(exception)
    except Exception:  # the exception object itself does not survive pickling
        exception = None
    return ("error", summary, text, exception)


def main():
    environ = os.environ
    rank = rank_from_environment(environ)
    client = StoreClient(environ["TUTTI_RUN_STORE_ADDR"], environ["TUTTI_RUN_STORE_PORT"],
                         environ["TUTTI_RUN_SECRET"])
    with client:
        payload = client.get(FUNCTION_KEY)
        exit_code = 0
        try:
            if payload is None:
                raise RuntimeError("the launcher's store holds no function to run")
            fn, args, kwargs = serialization.loads(payload)
            record = ("ok", fn(*args, **kwargs))
        except BaseException as exc:  # report everything, SystemExit included
            record = _error_record(exc)
            exit_code = 1
        try:
            data = serialization.dumps(record)
        except Exception as exc:
            try:
                raise TypeError("the result of rank %d cannot be pickled: %s" % (rank, exc))
            except TypeError as wrapped:
                data = serialization.dumps(_error_record(wrapped))
            exit_code = 1
        client.set(RESULT_KEY % rank, data)
    sys.stdout.flush()
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
