"""What the supervisor and its workers know of processes: /proc lines, process titles, the signal set.

Both sides need the same few facts: which signals the supervisor takes for
commands (a worker must unblock them, since it inherits the supervisor's
mask), who a process is (its parent and process group, to tell a worker's
descendant from an outsider), and what a process is called in ``ps``. They
live here, below both, so neither imports the other.

Reads of ``/proc/<pid>/stat`` are Linux-only; elsewhere they return None and
callers fall back to what they knew before (no sender, no leftover scan).
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

__all__ = ["COMMAND_SIGNALS", "ProcStat", "stat", "ancestry", "group_members", "describe", "set_title",
           "worker_title", "supervisor_title"]

#: the signals the supervisor acts on (stop, reload, one worker more / less): it blocks them to read their
#: sender, so a worker, which inherits the mask through fork and exec, unblocks them first thing
COMMAND_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGTTIN, signal.SIGTTOU)


@dataclass(frozen=True, slots=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` that say where a process belongs."""

    pid: int
    comm: str
    state: str
    ppid: int
    pgrp: int


def stat(pid: int) -> ProcStat | None:
    """One process's parent and group; None when it is gone (or there is no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    # comm is in parentheses and may itself hold ") ": split at the last one
    head, _, rest = raw.rpartition(")")
    fields = rest.split()
    try:
        return ProcStat(pid, head.partition("(")[2], fields[0], int(fields[1]), int(fields[2]))
    except (IndexError, ValueError):
        return None


def ancestry(pid: int, limit: int = 64) -> tuple[ProcStat, ...]:
    """``pid`` and its ancestors up to init, read at once (a short-lived sender is soon gone)."""
    chain: list[ProcStat] = []
    cur = pid
    while cur > 1 and len(chain) < limit:
        st = stat(cur)
        if st is None:
            break
        chain.append(st)
        cur = st.ppid
    return tuple(chain)


def group_members(pgid: int, *, exclude: int = 0) -> list[ProcStat]:
    """Living processes of a process group (zombies left out), by scanning /proc."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    out = []
    for name in names:
        if not name.isdigit() or int(name) == exclude:
            continue
        st = stat(int(name))
        if st is not None and st.pgrp == pgid and st.state != "Z":
            out.append(st)
    return out


def describe(pid: int) -> str:
    """``pid 1234 (bash)``: how a log line names a process (the kernel: pid 0)."""
    if pid <= 0:
        return "the kernel or a terminal (pid 0)"
    st = stat(pid)
    return f"pid {pid} ({st.comm})" if st is not None else f"pid {pid} (already gone)"


def set_title(title: str) -> None:
    """Set this process's title as ``ps`` and ``top`` show it (setproctitle; nothing if it is missing)."""
    try:
        import setproctitle
    except ImportError:  # pragma: no cover - a declared dependency; a stripped install still runs
        return
    setproctitle.setproctitle(title)


def worker_title(worker_id: int, handler: str) -> str:
    return f"rmqrun: worker {worker_id} [{handler}]"


def supervisor_title(group: str, topics: list[str]) -> str:
    return f"rmqrun: supervisor [{group}/{','.join(topics)}]"
