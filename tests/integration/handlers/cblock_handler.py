"""A handler for the per-call time limit: Python work, or a block in C, as each message's ``DO`` property says.

``DO=python:<s>`` sleeps ``s`` seconds in ``time.sleep`` (which resumes after a signal that
raises nothing); ``DO=cblock`` calls ``libc.sleep(3600)`` through ctypes, which a signal
interrupts for good (EINTR: it returns the seconds left, and is not retried). Each call
appends ``<offset> <start> <end> <how>`` (``time.monotonic`` of this process; ``how`` is ``ok``
or the exception's class) to ``RMQRUN_HANDLER_TIMES_FILE``.
"""

from __future__ import annotations

import ctypes
import os
import time

import rmqrun
from tests.integration.handlers.gap_handler import append_line

_libc = ctypes.CDLL(None, use_errno=True)


def handle(msg: rmqrun.Message) -> None:
    what = msg.properties.get("DO", "")
    start = time.monotonic()
    how = "ok"
    try:
        if what.startswith("python:"):
            time.sleep(float(what.split(":", 1)[1]))
        elif what == "cblock":
            _libc.sleep(3600)
    except BaseException as exc:
        how = type(exc).__name__
        raise
    finally:
        append_line(os.environ["RMQRUN_HANDLER_TIMES_FILE"],
                    f"{msg.queue_offset} {start:.6f} {time.monotonic():.6f} {how}\n")
