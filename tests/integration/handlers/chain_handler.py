"""A handler for the retry-chain tests: it fails chosen messages once and records every delivery.

One line per delivery in ``CHAIN_RECORD``::

    <event> <idx> <topic> <queue_id> <queue_offset> <reconsume_times> <unix time>

``idx`` is the message's ``idx`` property. Messages whose idx is in ``CHAIN_FAIL_IDX``
fail while their reconsume count is below ``CHAIN_FAIL_TIMES`` (default 1): by raising, or, with ``CHAIN_DELAY_LEVEL=n``,
by returning ``ReconsumeLater(delay_level=n)``.
"""

from __future__ import annotations

import os
import time

import rmqrun

FAIL_IDX = {int(x) for x in os.environ.get("CHAIN_FAIL_IDX", "").split(",") if x.strip()}
DELAY_LEVEL = os.environ.get("CHAIN_DELAY_LEVEL")
FAIL_TIMES = int(os.environ.get("CHAIN_FAIL_TIMES", "1"))


def _record(event: str, msg: rmqrun.Message) -> None:
    line = (f"{event} {msg.properties.get('idx', '-1')} {msg.topic} {msg.queue_id} {msg.queue_offset} "
            f"{msg.reconsume_times} {time.time():.3f}\n")
    fd = os.open(os.environ["CHAIN_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def handle(msg: rmqrun.Message):  # type: ignore[no-untyped-def]
    if int(msg.properties.get("idx", "-1")) in FAIL_IDX and msg.reconsume_times < FAIL_TIMES:
        _record("fail", msg)
        if DELAY_LEVEL:
            return rmqrun.ReconsumeLater(delay_level=int(DELAY_LEVEL))
        raise RuntimeError("failing on purpose")
    _record("ok", msg)
    return None
