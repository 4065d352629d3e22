"""ObjectState's commit, restore and agreed sync across real ranks (Gloo and MPI)."""

import json
import sys

import pytest

import launch

WORKER = launch.worker("workers/object_state.py")


@pytest.mark.parametrize("controller, np, ahead", [
    ("gloo", 2, 1), ("gloo", 3, 0), ("gloo", 3, 2), ("mpi", 3, 1)])
def test_sync_takes_the_state_of_the_rank_with_most_commits(controller, np, ahead):
    result = launch.run_ranks(np, [sys.executable, WORKER, str(ahead)],
                              controller=controller, timeout=120)
    assert result.returncode == 0, launch.describe(result)
    lines = [json.loads(line[line.index("{"):]) for line in result.stdout.splitlines()
             if '"rank"' in line]
    assert sorted(r["rank"] for r in lines) == list(range(np)), launch.describe(result)
    for report in lines:
        rank = report["rank"]
        assert report["restored"] == [rank * 10, [rank]], report
        assert (report["epoch"], report["history"], report["commits"]) == \
            (ahead * 10, [ahead], 2), report
        assert report["after_sync_restore"] == ahead * 10, report
