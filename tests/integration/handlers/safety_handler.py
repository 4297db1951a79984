"""Handlers that misbehave against their own service: they signal it, fork, hang, flood the log.

Each appends what it did to the file named by ``SAFETY_RECORD`` (one
``write`` per line, ``O_APPEND``), so the test reads it back:

    ok <pid> <queue_id> <offset> <idx>   a message handled
    child <pid>                          a process the handler started (to check it is gone later)
    start <pid> <queue_id> <offset>      written before a call that hangs

``SAFETY_HANG_OFFSETS`` (comma-separated queue offsets, first delivery only;
of queue ``SAFETY_HANG_QUEUE`` only, if set) choose the calls that hang in
:func:`hang_some`, for ``SAFETY_HANG_SECONDS`` (default: for ever).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

import rmqrun


def _write(line: str) -> None:
    fd = os.open(os.environ["SAFETY_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def _ok(msg: rmqrun.Message) -> None:
    _write(f"ok {os.getpid()} {msg.queue_id} {msg.queue_offset} {msg.properties.get('idx', '-1')}")


def signal_parent(msg: rmqrun.Message) -> None:
    """Offset 0 of each queue: SIGTERM the supervisor itself; offset 1: HUP and TTOU from a shell it starts."""
    if msg.reconsume_times == 0 and msg.queue_offset == 0:
        os.kill(os.getppid(), signal.SIGTERM)
    elif msg.reconsume_times == 0 and msg.queue_offset == 1:
        # a process that lingers after its kill, so the supervisor can still place it (a `kill` command that is
        # gone before the supervisor looks cannot be told from an outsider: see rmqrun/supervisor/lineage.py)
        subprocess.run(["sh", "-c", f"kill -HUP {os.getppid()}; sleep 1"], check=True)
        subprocess.run(["sh", "-c", f"kill -TTOU {os.getppid()}; sleep 1"], check=True)
    _ok(msg)


def fork_and_leave(msg: rmqrun.Message) -> None:
    """Start a `sleep 120` and fork a copy of the worker that sleeps 120 s, then return at once."""
    child = subprocess.Popen(["sleep", "120"])
    _write(f"child {child.pid}")
    pid = os.fork()
    if pid == 0:  # the forked copy: it sleeps, then returns into the worker's code (which must not run)
        time.sleep(120)
        return None
    _write(f"child {pid}")
    _ok(msg)


def hang_some(msg: rmqrun.Message) -> None:
    """The chosen offsets hang (sleep for ever) on their first delivery; the rest are recorded."""
    hang = {int(x) for x in os.environ.get("SAFETY_HANG_OFFSETS", "").split(",") if x.strip()}
    queue = os.environ.get("SAFETY_HANG_QUEUE")
    if msg.queue_offset in hang and msg.reconsume_times == 0 and (queue is None or msg.queue_id == int(queue)) \
            and _first_hang(msg):
        _write(f"start {os.getpid()} {msg.queue_id} {msg.queue_offset}")
        time.sleep(float(os.environ.get("SAFETY_HANG_SECONDS", 10 ** 6)))
    _ok(msg)


def _first_hang(msg: rmqrun.Message) -> bool:
    """With ``SAFETY_HANG_ONCE`` set, only the first call on a message hangs (a re-run after a kill does not)."""
    if not os.environ.get("SAFETY_HANG_ONCE"):
        return True
    try:
        os.close(os.open(f"{os.environ['SAFETY_RECORD']}.hung-{msg.queue_id}-{msg.queue_offset}",
                         os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def flood_stderr(msg: rmqrun.Message) -> None:
    """10 MB to stderr in one write, no newline; 1 MB through ``logging``; then a short line."""
    sys.stderr.write("x" * 10_000_000)
    sys.stderr.write("\n")
    logging.getLogger("app").warning("%s", "y" * 1_000_000)
    print(f"after the flood at offset {msg.queue_offset}")
    _ok(msg)
