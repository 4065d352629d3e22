"""Process sets on 3 ranks (or more): `process_sets.py`.

1. static: init(process_sets=[[0, 1], ProcessSet([1, 2])]); ids, rank(), size(), included(),
   ranks and repr; every collective on each set, and on both sets and the global set at
   the same time (rank 1 is in both), checked against numpy references.
2. dynamic: add [0, 2] and [2] at run time, use them, remove them; a removed set is refused.
3. rooted: root_rank on a set is a global rank (Horovod's convention): [1, 2] broadcasts
   from rank 2 and from rank 1; a root outside the set is refused with its message.
4. restart: after shutdown() and init() the old sets are unregistered (their id reads None,
   using one says to register it again); registering them again works.
Prints "rank R: <step> ok" lines and a summary; exits 1 on any failure.
"""

import sys

import numpy as np

import tutti.numpy as hvd
from tutti.common import process_sets as by_id
from reference import Checker, make_input, reduce_reference, say, scatter_rows


class SetChecker(Checker):
    def set_collectives(self, label, process_set, case):
        """Every collective on `process_set`, from this rank if it is a member."""
        members = process_set.ranks
        if self.rank not in members:
            return []
        n = len(members)
        me = members.index(self.rank)
        inputs = {r: make_input("float32", hvd.Sum, (n + 1, 2), case, r) for r in members}
        x = inputs[self.rank]
        kwargs = {"process_set": process_set}
        handles = {
            "allreduce": hvd.allreduce_async(x, op=hvd.Sum, name=label + ".ar", **kwargs),
            "average": hvd.allreduce_async(x, name=label + ".avg", **kwargs),
            "allgather": hvd.allgather_async(x, name=label + ".ag", **kwargs),
            "broadcast": hvd.broadcast_async(x, root_rank=members[-1], name=label + ".bc",
                                             **kwargs),
            "alltoall": hvd.alltoall_async(np.concatenate([x] * n), name=label + ".a2a",
                                           **kwargs),
            "reducescatter": hvd.reducescatter_async(x, op=hvd.Sum, name=label + ".rs",
                                                     **kwargs),
            "grouped": hvd.grouped_allreduce_async([x, 2 * x], op=hvd.Max, name=label + ".g",
                                                   **kwargs),
        }
        stack = [inputs[r] for r in members]
        total = reduce_reference("float32", hvd.Sum, stack)
        offsets = np.cumsum([0] + scatter_rows(n + 1, n))
        expected = {
            "allreduce": total,
            "average": reduce_reference("float32", hvd.Average, stack),
            "allgather": np.concatenate(stack),
            "broadcast": inputs[members[-1]],
            "alltoall": np.concatenate(stack),
            "reducescatter": total[offsets[me]:offsets[me + 1]],
        }
        return [(label, handles, expected, stack)]

    def check_results(self, pending):
        for label, handles, expected, stack in pending:
            for kind, handle in handles.items():
                result = self.run("%s.%s" % (label, kind), hvd.synchronize, handle, 60)
                if result is None:
                    continue
                if kind == "alltoall":
                    result, received = result
                    self.equal(label + ".received_splits", received,
                               np.full(len(stack), stack[0].shape[0], np.int32))
                if kind == "grouped":
                    self.equal(label + ".grouped[0]", result[0],
                               reduce_reference("float32", hvd.Max, stack))
                    self.equal(label + ".grouped[1]", result[1],
                               reduce_reference("float32", hvd.Max, [2 * s for s in stack]))
                    continue
                self.equal("%s.%s" % (label, kind), result, expected[kind])

    def describe(self, label, process_set, expected_ranks):
        if process_set.ranks != expected_ranks:
            self.fail(label, "ranks %s, expected %s" % (process_set.ranks, expected_ranks))
        if process_set.process_set_id is None:
            return self.fail(label, "not registered: %r" % process_set)
        included = self.rank in expected_ranks
        if process_set.included() != included or process_set.size() != len(expected_ranks):
            return self.fail(label, "included()/size() wrong for %r" % process_set)
        if included and process_set.rank() != expected_ranks.index(self.rank):
            return self.fail(label, "rank() is %d" % process_set.rank())
        # The same facts by id, as the frontends ask for them.
        set_id = process_set.process_set_id
        if by_id.set_size(set_id) != len(expected_ranks):
            return self.fail(label, "set_size(%d) is %d" % (set_id, by_id.set_size(set_id)))
        if included and by_id.set_rank(set_id) != expected_ranks.index(self.rank):
            return self.fail(label, "set_rank(%d) is %d" % (set_id, by_id.set_rank(set_id)))
        if not included:
            message = self.expect_error(label, hvd.InvalidArgumentError, process_set.rank)
            if message is not None and "included()" not in message:
                self.fail(label, "rank() of a non-member: %s" % message)
            message = self.expect_error(label, hvd.InvalidArgumentError,
                                        lambda: by_id.set_rank(set_id))
            expected = "rank %d is not in %r; check included()" % (self.rank, process_set)
            if message is not None and not message.startswith(expected):
                self.fail(label, "set_rank() of a non-member: %s" % message)
        self.passed += 1


def static(check):
    first, second = [0, 1], hvd.ProcessSet([2, 1])
    registered = hvd.init(process_sets=[first, second])
    first_set = registered[0]
    if registered[1] is not second or hvd.init(process_sets=[second]) != [second]:
        check.fail("static.init", "init() did not return the registered sets: %r" % registered)
    global_set = hvd.global_process_set
    assert global_set.process_set_id == 0 and global_set.ranks == list(range(check.size))
    assert global_set.rank() == check.rank and global_set.size() == check.size
    check.describe("static.second", second, [1, 2])
    say("rank %d: %r" % (check.rank, second))
    check.describe("static.first", first_set, first)
    ids = [first_set.process_set_id, second.process_set_id]
    if ids != [1, 2]:
        check.fail("static.ids", "registered ids %s" % ids)
    pending = []
    pending += check.set_collectives("static.first", first_set, 1)
    pending += check.set_collectives("static.second", second, 2)
    pending += check.set_collectives("static.global", global_set, 3)
    check.check_results(pending)
    say("rank %d: static ok" % check.rank)
    return first_set, second


def dynamic(check):
    outer = hvd.add_process_set([0, 2])
    alone = hvd.add_process_set(hvd.ProcessSet([2]))
    check.describe("dynamic.outer", outer, [0, 2])
    check.describe("dynamic.alone", alone, [2])
    pending = check.set_collectives("dynamic.outer", outer, 4)
    pending += check.set_collectives("dynamic.alone", alone, 5)
    check.check_results(pending)
    if outer.included():
        hvd.barrier(process_set=outer)
    outer_id = outer.process_set_id
    assert hvd.remove_process_set(outer) is True
    hvd.remove_process_set(alone)
    if outer.process_set_id is not None:
        check.fail("dynamic.removed", "a removed set still has an id: %r" % outer)
    message = check.expect_error("dynamic.removed", hvd.InvalidArgumentError,
                                 lambda: hvd.allreduce(np.ones(2), process_set=outer))
    if message is not None and "not registered" not in message:
        check.fail("dynamic.removed", message)
    message = check.expect_error("dynamic.removed_id", hvd.InvalidArgumentError,
                                 lambda: by_id.set_size(outer_id))  # ids are never reused
    unknown = "process set %d is not known to the core" % outer_id
    if message is not None and not message.startswith(unknown):
        check.fail("dynamic.removed_id", message)
    # The same ranks can be registered again.
    again = hvd.add_process_set(outer)
    check.describe("dynamic.again", again, [0, 2])
    hvd.remove_process_set(again)
    say("rank %d: dynamic ok" % check.rank)


def rooted(check, second):
    """On [1, 2] (set id 2) the roots are global ranks 1 and 2; global rank 0 is no root."""
    if second.included():
        mine = np.full(3, 10.0 * check.rank, np.float32)
        for root in (2, 1):
            got = check.run("rooted.%d" % root, hvd.broadcast, mine, root_rank=root,
                            process_set=second, name="rooted.%d" % root)
            if got is not None:
                check.equal("rooted.%d" % root, got, np.full(3, 10.0 * root, np.float32))
        message = check.expect_error(
            "rooted.outsider", hvd.InvalidArgumentError,
            lambda: hvd.broadcast(mine, root_rank=0, process_set=second, name="rooted.outsider"))
        expected = ("broadcast of 'rooted.outsider': root_rank 0 is not a member of process "
                    "set 2 (ranks 1, 2)")
        if message is not None and message != expected:
            check.fail("rooted.outsider", message)
        say("rank %d: outsider root: %s" % (check.rank, message))
    hvd.barrier()
    say("rank %d: rooted ok" % check.rank)


def restart(check, first, second):
    hvd.barrier()
    hvd.shutdown()
    if second.process_set_id is not None:
        check.fail("restart", "a set keeps its id after shutdown: %r" % second)
    if second.size() is not None or second.rank() is not None:
        check.fail("restart.before_init", "size()/rank() of an unregistered set must be None")
    hvd.init()
    message = check.expect_error("restart.stale", hvd.InvalidArgumentError,
                                 lambda: hvd.allreduce(np.ones(2), process_set=second))
    if message is not None and "register it again" not in message:
        check.fail("restart.stale", message)
    say("rank %d: stale set: %s" % (check.rank, message))
    hvd.shutdown()
    hvd.init(process_sets=[first, second])  # the ProcessSet objects of the first session
    check.describe("restart.first", first, [0, 1])
    check.describe("restart.second", second, [1, 2])
    check.check_results(check.set_collectives("restart.second", second, 6))
    hvd.barrier()  # rank 0 is not in `second`: it must not shut down while 1 and 2 work
    say("rank %d: restart ok" % check.rank)


def main():
    hvd.init()
    check = SetChecker()
    hvd.shutdown()
    first, second = static(check)
    dynamic(check)
    rooted(check, second)
    restart(check, first, second)
    threads = hvd.mpi_threads_supported()
    say("rank %d: mpi_threads_supported %s under %s" % (check.rank, threads, hvd.controller()))
    hvd.shutdown()
    return check.report()


if __name__ == "__main__":
    sys.exit(main())
