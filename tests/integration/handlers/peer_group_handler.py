"""A handler for groups shared with another client: one JSON line per delivery, failures on request.

Tests that put rmqrun and the Apache C++ client in one consumer group compare
what each member consumed, so a record must say *which* queue a delivery came
from (a retry comes from ``%RETRY%<group>``, while ``msg.topic`` already names
the original topic, as in Java) and *which* message it was (``msg_id`` is the
producer's UNIQ_KEY, the same on every retry). Each delivery appends to the
file named by ``PEER_RECORD`` (``O_APPEND``, one ``write`` per message, so
workers can share it)::

    {"verdict": "ok"|"fail", "topic": ..., "retry": bool, "queue_id": ..., "queue_offset": ...,
     "msg_id": ..., "idx": ..., "body": ..., "reconsume_times": ..., "pid": ...}

=================  ==========================================================
``PEER_FAIL_IDX``  comma-separated ``idx`` property values whose first
                   delivery (reconsume_times 0) fails by raising
``PEER_SLEEP_MS``  sleep this long per message (default 0)
=================  ==========================================================

The variables use a ``PEER_`` prefix: ``rmqrun run`` refuses ``RMQRUN_*``
variables it does not know.
"""

from __future__ import annotations

import json
import os
import time

import rmqrun

FAIL_IDX = {x.strip() for x in os.environ.get("PEER_FAIL_IDX", "").split(",") if x.strip()}
SLEEP_S = float(os.environ.get("PEER_SLEEP_MS", "0")) / 1000.0


def _write(msg: rmqrun.Message, verdict: str) -> None:
    line = json.dumps({
        "verdict": verdict, "topic": msg.topic, "retry": "RETRY_TOPIC" in msg.properties,
        "queue_id": msg.queue_id, "queue_offset": msg.queue_offset, "msg_id": msg.msg_id,
        "idx": msg.properties.get("idx"), "body": msg.body.decode("utf-8", "replace"),
        "reconsume_times": msg.reconsume_times, "pid": os.getpid(),
    })
    fd = os.open(os.environ["PEER_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def handle(msg: rmqrun.Message) -> None:
    if SLEEP_S:
        time.sleep(SLEEP_S)
    if msg.properties.get("idx") in FAIL_IDX and msg.reconsume_times == 0:
        _write(msg, "fail")
        raise RuntimeError(f"failing idx {msg.properties.get('idx')} once, on purpose")
    _write(msg, "ok")
