"""A handler for the lock-gap tests: one line per call, with when it began and ended.

Each call sleeps ``GAP_SLEEP_MS`` and appends ``<pid> <queue> <offset> <start ns> <end ns>``
(``time.monotonic_ns``: CLOCK_MONOTONIC, one clock for every process of the machine, the test's
too) to ``GAP_RECORD`` with one ``write`` (``O_APPEND``), so every worker of every instance shares
the file.
"""

from __future__ import annotations

import os
import time

import rmqrun

SLEEP_S = float(os.environ.get("GAP_SLEEP_MS", "0")) / 1000


def handle(msg: rmqrun.Message) -> None:
    start = time.monotonic_ns()
    if SLEEP_S:
        time.sleep(SLEEP_S)
    append_line(os.environ["GAP_RECORD"], f"{os.getpid()} {msg.queue_id} {msg.queue_offset} {start} "
                                          f"{time.monotonic_ns()}\n")


def append_line(path: str, line: str) -> None:
    """One ``write`` with ``O_APPEND``: the lines of every process sharing the file stay whole."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
