"""The probe handler with the wall-clock time of each delivery: for the POP redelivery deadline test.

``record`` is :func:`tests.integration.handlers.probe_handler.record` plus one line per delivery in the file named by
``PROBE_TIMES``: ``<idx> <reconsume_times> <epoch ms as the call began>``. The broker runs on the same host,
so its pop times and these times read the same clock.
"""

from __future__ import annotations

import os
import time

import rmqrun
from tests.integration.handlers import probe_handler


def record(msg: rmqrun.Message):  # type: ignore[no-untyped-def]
    began = int(time.time() * 1000)
    line = f"{probe_handler.idx_of(msg)} {msg.reconsume_times} {began}\n".encode()
    fd = os.open(os.environ["PROBE_TIMES"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return probe_handler.record(msg)


def read_times(path: "os.PathLike[str]") -> list[tuple[int, int, int]]:
    """(idx, reconsume_times, epoch ms) per delivery, in the order written."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3:
                out.append((int(parts[0]), int(parts[1]), int(parts[2])))
    return out
