"""A handler that fails chosen offsets a chosen number of times, and logs every delivery.

``RMQRUN_HANDLER_FAIL_OFFSETS`` is a comma-separated list of queue offsets that fail
while the message's reconsume count is below ``RMQRUN_HANDLER_FAIL_TIMES``. Each
delivery appends ``queue offset ok|fail reconsume_times`` to
``RMQRUN_HANDLER_RECORD_FILE``, so tests see the exact delivery sequence.
"""

from __future__ import annotations

import os

import rmqrun

FAIL = {int(x) for x in os.environ.get("RMQRUN_HANDLER_FAIL_OFFSETS", "").split(",") if x.strip()}
TIMES = int(os.environ.get("RMQRUN_HANDLER_FAIL_TIMES", "1"))


def _record(msg: rmqrun.Message, status: str) -> None:
    fd = os.open(os.environ["RMQRUN_HANDLER_RECORD_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        offset = int(msg.properties.get("idx", msg.queue_offset))
        os.write(fd, f"{msg.queue_id} {offset} {status} {msg.reconsume_times}\n".encode())
    finally:
        os.close(fd)


def handle(msg: rmqrun.Message) -> None:
    offset = int(msg.properties.get("idx", msg.queue_offset))
    if offset in FAIL and msg.reconsume_times < TIMES:
        _record(msg, "fail")
        raise RuntimeError(f"failing offset {offset} on purpose (reconsume_times {msg.reconsume_times})")
    _record(msg, "ok")
