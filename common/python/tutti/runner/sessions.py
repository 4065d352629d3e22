"""Stopping every process of a session, so that nothing a rank started outlives the job.

Each process tuttirun starts leads a new session (start_new_session=True). Its children,
grandchildren, and even those that moved to another process group (mpirun's ranks do)
stay in that session unless they call setsid() themselves, so "all live processes whose
session id is S" is the whole tree, even after the leader has exited.
"""

import os
import signal
import time


def _proc_stat_fields(pid):
    """Fields after `(comm)` of /proc/<pid>/stat: state, ppid, pgrp, session, ..."""
    with open("/proc/%s/stat" % pid, "rb") as handle:
        stat = handle.read()
    # comm may contain spaces and parentheses; it ends at the last ')'.
    return stat[stat.rfind(b")") + 2:].split()


_SESSION_FIELD = 3
_GROUP_FIELD = 2


def members(session_ids, field=_SESSION_FIELD, exclude=()):
    """Live (non-zombie) processes of the given sessions (or process groups, with
    field=_GROUP_FIELD), except the pids in `exclude`: {id: [pid, ...]}."""
    wanted = set(session_ids)
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in exclude:
            continue
        try:
            fields = _proc_stat_fields(entry)
            owner = int(fields[field])
        except (OSError, IndexError, ValueError):
            continue
        if owner in wanted and fields[0] != b"Z":
            found.setdefault(owner, []).append(int(entry))
    return found


def _signal_members(ids, signum, field, exclude):
    """Signals every member; returns the ids that had members."""
    found = members(ids, field, exclude)
    for pids in found.values():
        for pid in pids:
            try:
                os.kill(pid, signum)
            except (ProcessLookupError, PermissionError):
                pass
    return list(found)


def stop_sessions(session_ids, grace_seconds, poll_interval=0.05, field=_SESSION_FIELD,
                  exclude=()):
    """SIGTERM every process of the sessions, SIGKILL what survives `grace_seconds`.

    Returns once the sessions are empty, or about one second after the SIGKILL.
    """
    alive = _signal_members(session_ids, signal.SIGTERM, field, exclude)
    deadline = time.monotonic() + grace_seconds
    while alive and time.monotonic() < deadline:
        time.sleep(poll_interval)
        alive = list(members(alive, field, exclude))
    deadline = time.monotonic() + 1.0
    while alive and time.monotonic() < deadline:
        # Repeat: a process may have forked between the scan and the signal.
        alive = _signal_members(alive, signal.SIGKILL, field, exclude)
        time.sleep(poll_interval)


def stop_own_group(grace_seconds):
    """Stops every other process of the caller's process group, the same way."""
    stop_sessions([os.getpgrp()], grace_seconds, field=_GROUP_FIELD, exclude={os.getpid()})


def describe_exit(returncode):
    """(exit code to report, words for it) for a Popen returncode."""
    if returncode < 0:
        signum = -returncode
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = "signal %d" % signum
        return 128 + signum, "was killed by %s" % name
    return returncode, "exited with code %d" % returncode
