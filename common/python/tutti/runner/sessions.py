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


def members(session_ids):
    """Live (non-zombie) processes of the given sessions: {session id: [pid, ...]}."""
    wanted = set(session_ids)
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = _proc_stat_fields(entry)
            session = int(fields[3])
        except (OSError, IndexError, ValueError):
            continue
        if session in wanted and fields[0] != b"Z":
            found.setdefault(session, []).append(int(entry))
    return found


def _signal_sessions(session_ids, signum):
    """Signals every member; returns the sessions that had members."""
    found = members(session_ids)
    for pids in found.values():
        for pid in pids:
            try:
                os.kill(pid, signum)
            except (ProcessLookupError, PermissionError):
                pass
    return list(found)


def stop_sessions(session_ids, grace_seconds, poll_interval=0.05):
    """SIGTERM every process of the sessions, SIGKILL what survives `grace_seconds`.

    Returns once the sessions are empty, or about one second after the SIGKILL.
    """
    alive = _signal_sessions(session_ids, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while alive and time.monotonic() < deadline:
        time.sleep(poll_interval)
        alive = list(members(alive))
    deadline = time.monotonic() + 1.0
    while alive and time.monotonic() < deadline:
        # Repeat: a process may have forked between the scan and the signal.
        alive = _signal_sessions(alive, signal.SIGKILL)
        time.sleep(poll_interval)


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
