"""A handler that records where each message was: one line ``<broker_name> <queue_id> <queue_offset>``.

The file is named by ``PROBE_WHERE`` (``O_APPEND``, one write per message, so several
workers and several instances can share it).
"""

from __future__ import annotations

import os

import rmqrun

_PATH = os.environ.get("PROBE_WHERE", "")


def handle(msg: rmqrun.Message) -> None:
    fd = os.open(_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{msg.broker_name} {msg.queue_id} {msg.queue_offset}\n".encode())
    finally:
        os.close(fd)
