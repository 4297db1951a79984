"""The chaos suite's handler: records every call to a file the audit reads, and misbehaves on request.

``scripts/chaos.py`` starts ``rmqrun run workers.chaos:handle`` with
``RMQRUN_HANDLER_CHAOS_DIR`` (where the records go) and
``RMQRUN_HANDLER_CHAOS_GROUP`` (whose records they are). Each call appends one
line to ``<dir>/handled-<group>.log`` with one ``os.write`` on an O_APPEND file,
so several workers of several ``rmqrun run`` instances share the file and the
file's order is the order the calls happened in (what the orderly audit needs):

    <event> <unix time> <pid> <queue id> <queue offset> <reconsume times> <msg id> <misbehaviour>

``event`` is ``ok`` (the call returns normally, written just before returning),
``raise``, ``hang`` or ``leak`` (written before misbehaving). A line cut by a
SIGKILL has fewer fields and is ignored by the audit.

The producer marks a few messages with the property ``CHAOS`` = ``raise`` /
``hang`` / ``leak``. A marked message misbehaves on its first call in each
group only (an ``O_CREAT | O_EXCL`` marker file decides, so the decision holds
across workers, restarts and retries whatever rmqrun reports as
``reconsume_times``): ``raise`` raises, ``hang`` sleeps past the time limit
(rmqrun's soft time limit interrupts it, and it counts as a failure), ``leak``
keeps ``RMQRUN_HANDLER_CHAOS_LEAK_MB`` MiB for the life of the worker and then
succeeds, so ``max_memory_per_worker`` has to recycle the worker.
"""

from __future__ import annotations

import os
import time

import rmqrun

_fd: int | None = None
_leaked: list[bytearray] = []


class ChaosError(RuntimeError):
    """What a ``CHAOS=raise`` message raises on its first call."""


def _dir() -> str:
    return os.environ["RMQRUN_HANDLER_CHAOS_DIR"]


def _group() -> str:
    return os.environ["RMQRUN_HANDLER_CHAOS_GROUP"]


def _record(event: str, msg: rmqrun.Message, what: str) -> None:
    global _fd
    if _fd is None:
        path = os.path.join(_dir(), f"handled-{_group()}.log")
        _fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    line = (f"{event} {time.time():.6f} {os.getpid()} {msg.queue_id} {msg.queue_offset} {msg.reconsume_times} "
            f"{msg.msg_id} {what}\n")
    os.write(_fd, line.encode())


def _first_call(msg: rmqrun.Message) -> bool:
    """True exactly once per (group, message), across every process of the run."""
    marker = os.path.join(_dir(), "markers", f"{_group()}-{msg.msg_id}")
    try:
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        return False
    return True


def handle(msg: rmqrun.Message) -> None:
    """Record the call; misbehave first if the message asks for it and this is its first call in the group."""
    what = msg.properties.get("CHAOS", "-")
    if what != "-" and _first_call(msg):
        _record(what, msg, what)
        if what == "raise":
            raise ChaosError(f"chaos: failing {msg.msg_id} once on purpose")
        if what == "hang":
            time.sleep(3600)  # the soft time limit interrupts this sleep
        if what == "leak":
            chunk = bytearray(int(float(os.environ.get("RMQRUN_HANDLER_CHAOS_LEAK_MB", "24")) * 2**20))
            chunk[::4096] = b"x" * len(chunk[::4096])  # touch every page so it counts in RSS
            _leaked.append(chunk)
    _record("ok", msg, what)
