"""A handler that raises KeyboardInterrupt itself on the first delivery of body ``m1`` (no signal is sent),
and appends ``body reconsume_times`` of every message it handles to ``RMQRUN_HANDLER_RECORD``."""

from __future__ import annotations

import os

import rmqrun


def handle(msg: rmqrun.Message) -> None:
    if msg.body == b"m1" and msg.reconsume_times == 0:
        raise KeyboardInterrupt("raised by the handler, no signal sent")
    with open(os.environ["RMQRUN_HANDLER_RECORD"], "a", encoding="utf-8") as f:
        f.write(f"{msg.body.decode()} {msg.reconsume_times}\n")
