"""A handler for the orderly pipelining tests: it records each call and misbehaves on chosen offsets.

Each call appends ``<event> <queue_offset> <pid>`` to ``PIPE_RECORD`` (``start`` before the
call's work, then ``ok`` or ``fail``), so a test sees which messages ran, in what order and how
often. ``PIPE_SLEEP_MS`` sleeps per call; offsets in ``PIPE_FAIL`` raise, offsets in ``PIPE_CRASH``
end the worker (``os._exit(7)``) after their ``start`` line.
"""

from __future__ import annotations

import os
import time

import rmqrun


def _offsets(name: str) -> set[int]:
    return {int(x) for x in os.environ.get(name, "").split(",") if x.strip()}


FAIL = _offsets("PIPE_FAIL")
CRASH = _offsets("PIPE_CRASH")
SLEEP_S = float(os.environ.get("PIPE_SLEEP_MS", "0")) / 1000.0
SLOW = _offsets("PIPE_SLOW")


def _write(event: str, offset: int) -> None:
    fd = os.open(os.environ["PIPE_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{event} {offset} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


def handle(msg: rmqrun.Message) -> None:
    offset = msg.queue_offset
    _write("start", offset)
    if SLEEP_S:
        time.sleep(SLEEP_S)
    if offset in SLOW:
        time.sleep(1.0)
    if offset in CRASH:
        os._exit(7)
    if offset in FAIL and msg.reconsume_times == 0:
        _write("fail", offset)
        raise RuntimeError(f"failing offset {offset} on purpose")
    _write("ok", offset)
