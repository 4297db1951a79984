"""An orderly handler for the lock tests: records ``queue_id offset`` and can hold one message.

``LOCK_RECORD`` names the record file. With ``LOCK_GATE`` set, the message at
offset 0 of queue 0 first creates ``LOCK_GATE + ".started"``, then waits until
the file ``LOCK_GATE`` exists: the test holds a job in flight while it takes the
queue's broker lock away. With ``LOCK_GATE_FAIL`` set, that message then raises.
"""

from __future__ import annotations

import os
import time

import rmqrun


def handle(msg: rmqrun.Message) -> None:
    gate = os.environ.get("LOCK_GATE")
    if gate and msg.queue_id == 0 and msg.queue_offset == 0:
        with open(gate + ".started", "w"):
            pass
        while not os.path.exists(gate):
            time.sleep(0.02)
        if os.environ.get("LOCK_GATE_FAIL"):
            raise RuntimeError("the held message fails once let go")
    fd = os.open(os.environ["LOCK_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{msg.queue_id} {msg.queue_offset}\n".encode())
    finally:
        os.close(fd)
