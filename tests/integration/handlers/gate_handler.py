"""A handler that holds the message at queue offset 5 until a gate file exists.

Every other message is recorded at once (``queue_id offset`` lines in
``RMQRUN_HANDLER_RECORD_FILE``), so a test can finish all but one message and look
at what the consumer commits meanwhile.
"""

from __future__ import annotations

import os
import time

import rmqrun


def handle(msg: rmqrun.Message) -> None:
    if msg.queue_offset == 5:
        gate = os.environ["RMQRUN_HANDLER_GATE_FILE"]
        while not os.path.exists(gate):
            time.sleep(0.02)
    fd = os.open(os.environ["RMQRUN_HANDLER_RECORD_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{msg.queue_id} {msg.queue_offset}\n".encode())
    finally:
        os.close(fd)
