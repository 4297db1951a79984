"""A handler that dead-letters chosen messages two ways, for the dead-letter tests.

A message whose ``fate`` property is ``fail`` raises every time (so it reaches the DLQ
once max_reconsume_times is used up); ``dlq`` asks for the DLQ at once with
``ReconsumeLater(delay_level=-1)``; anything else succeeds.
"""

from __future__ import annotations

import rmqrun


def handle(msg: rmqrun.Message) -> rmqrun.ReconsumeLater | None:
    fate = msg.properties.get("fate")
    if fate == "fail":
        raise RuntimeError(f"failing {msg.properties.get('idx')} on purpose")
    if fate == "dlq":
        return rmqrun.ReconsumeLater(delay_level=-1)
    return None
