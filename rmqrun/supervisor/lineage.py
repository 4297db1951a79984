"""Which worker a process belongs to, and what a worker leaves behind.

Each worker is started as the leader of its own process group
(:func:`rmqrun.supervisor.worker_process.spawn_worker`), so whatever its
handler starts (a ``subprocess``, an ``os.fork``, a shell pipeline) is in
that group unless it asks for a new one. Two questions follow, both answered
from ``/proc``:

* who sent the supervisor a signal: a worker, or a process of a worker
  (same process group, or a worker among its ancestors)? Then it is
  ignored, since a handler must not be able to stop or resize the service;
* what is left of a worker's group once the worker is gone: those processes
  are killed (SIGKILL to the group), with a warning naming them, so a
  replaced or stopped worker leaves no orphans titled like workers.
"""

from __future__ import annotations

import os
import signal
from typing import Mapping, Sequence

from loguru import logger

from rmqrun.pipe import procs

__all__ = ["owner_of", "kill_leftovers"]

def owner_of(workers: Mapping[int, int], pid: int, chain: Sequence[procs.ProcStat] = ()) -> int | None:
    """The pid of the worker (a key of ``workers``: pid -> worker id) ``pid`` is or descends from; None if none.

    ``chain`` is ``pid`` and its ancestors as read when the signal arrived
    (:func:`rmqrun.pipe.procs.ancestry`): a ``kill`` command has exited by the
    time the event loop looks. One already gone when the signal was taken (a
    ``kill`` command may exit first on a busy machine) cannot be placed; nor
    can one that left the worker's group (``setsid``) and was orphaned
    (re-parented to init): both count as outsiders, and the line acting on the
    signal names the pid as "already gone".
    """
    if pid in workers:
        return pid
    for st in chain:
        if st.pid in workers:
            return st.pid
        if st.pgrp in workers:
            return st.pgrp
        if st.ppid in workers:
            return st.ppid
    return None


def kill_leftovers(worker_id: int, pid: int) -> int:
    """Kill what is left of a dead worker's process group; returns how many processes there were."""
    left = procs.group_members(pid)
    if not left:
        return 0
    names = ", ".join(f"pid {p.pid} ({p.comm})" for p in left[:8]) + (" ..." if len(left) > 8 else "")
    logger.warning("worker {} (pid {}) left {} process(es) of its handler behind: {}; killing them "
                   "(a handler's children must not outlive its worker)", worker_id, pid, len(left), names)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return len(left)
