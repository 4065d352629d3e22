"""join() with uneven work, on 2 or 3 ranks: `join.py`.

1. uneven: rank r makes 2 + 2r allreduce steps (Sum and Average, single and grouped, some
   in place), unnamed, then joins. A joined rank contributes zeros and Average still
   divides by the job size; join() returns the last rank to join (the busiest) everywhere.
2. others: rank 0 joins at once; the other ranks' allgather and broadcast fail with an
   error naming rank 0, their allreduce still works; then they join.
3. after: unnamed requests are numbered from 0 again on every rank, so an unnamed
   allreduce after join matches although the ranks made different numbers of calls.
Prints "rank R: <phase>: ..." lines and a summary; exits 1 on any failure.
"""

import sys
import time

import numpy as np

import tutti.numpy as hvd
from reference import Checker, say


def value(rank, step):
    return np.arange(4, dtype=np.float32) + 10 * step + rank + 1


def uneven(check):
    steps = [2 + 2 * r for r in range(check.size)]
    for step in range(steps[check.rank]):
        active = [r for r in range(check.size) if steps[r] > step]
        total = sum(value(r, step) for r in active)
        x = value(check.rank, step)
        if step % 2 == 0:
            check.equal("uneven.sum.%d" % step, check.run("uneven", hvd.allreduce, x,
                                                          op=hvd.Sum), total)
            in_place = x.copy()
            check.run("uneven", hvd.allreduce_, in_place)
            check.equal("uneven.average.%d" % step, in_place, total / check.size)
        else:
            got = check.run("uneven", hvd.grouped_allreduce, [x, 2 * x], op=hvd.Sum)
            if got is not None:
                check.equal("uneven.grouped.%d" % step, got[0], total)
                check.equal("uneven.grouped2.%d" % step, got[1], 2 * total)
    last = hvd.join()
    if last != check.size - 1:
        check.fail("uneven.join", "join() returned %r, expected %d" % (last, check.size - 1))
    say("rank %d: uneven: %d steps, join returned %d" % (check.rank, steps[check.rank], last))


def others(check):
    if check.rank == 0:
        last = hvd.join()
    else:
        x = np.ones((2, 2), np.float32)
        for label, call in (("allgather", lambda: hvd.allgather(x, name="while.joined.ag")),
                            ("broadcast", lambda: hvd.broadcast(x, 0, name="while.joined.bc"))):
            message = check.expect_error("others." + label, hvd.PreconditionError, call)
            say("rank %d: others: %s: %s" % (check.rank, label, message))
        got = hvd.allreduce(x, op=hvd.Sum, name="while.joined.ar")
        check.equal("others.allreduce", got, x * (check.size - 1))
        time.sleep(0.2 * check.rank)  # the highest rank joins last
        last = hvd.join()
    if last != check.size - 1:
        check.fail("others.join", "join() returned %r, expected %d" % (last, check.size - 1))
    say("rank %d: others: join returned %d" % (check.rank, last))


def after(check):
    got = hvd.allreduce(np.full(3, check.rank, np.int64), op=hvd.Sum)  # unnamed
    check.equal("after", got, np.full(3, sum(range(check.size)), np.int64))
    say("rank %d: after: ok" % check.rank)


def main():
    hvd.init()
    check = Checker()
    uneven(check)
    others(check)
    after(check)
    hvd.shutdown()
    return check.report()


if __name__ == "__main__":
    sys.exit(main())
