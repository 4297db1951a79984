"""Appends ``queue_id offset`` per message to the file named by ``RMQRUN_HANDLER_RECORD_FILE``.

Used by order checks: with one line per consumed message, a test can verify
that each queue's offsets appear in increasing order and that none is lost.
Lines are written with O_APPEND and flushed per message, so several workers
can share the file and a crash loses at most the line being written.
``RMQRUN_HANDLER_RECORD_SLEEP_MS`` (default 0) makes each message take that long.
"""

from __future__ import annotations

import os
import time

import rmqrun

_fd: int | None = None


def _file() -> int:
    global _fd
    if _fd is None:
        path = os.environ["RMQRUN_HANDLER_RECORD_FILE"]
        _fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    return _fd


def _sleep() -> None:
    ms = float(os.environ.get("RMQRUN_HANDLER_RECORD_SLEEP_MS", "0"))
    if ms > 0:
        time.sleep(ms / 1000.0)


def handle(msg: rmqrun.Message) -> None:
    _sleep()
    os.write(_file(), f"{msg.queue_id} {msg.queue_offset}\n".encode())


@rmqrun.batch
def handle_batch(msgs: list[rmqrun.Message]) -> None:
    _sleep()
    os.write(_file(), "".join(f"{m.queue_id} {m.queue_offset}\n" for m in msgs).encode())
