"""A handler whose worker processes die on their own, outside any handler call: a broken environment.

Importing this module (which every worker does at boot) starts a thread that
ends the process with ``os._exit(9)`` ``PROBE_DIE_AFTER_MS`` (default 400)
later, whatever it is doing. The handler itself records each message as
``ok`` (see :mod:`tests.integration.handlers.probe_handler`). Deaths that no message
explains are what rmqrun's crash-loop guard counts.
"""

from __future__ import annotations

import os
import threading
import time

import rmqrun
from tests.integration.handlers.probe_handler import _calls, _write


def _die_later() -> None:
    time.sleep(float(os.environ.get("PROBE_DIE_AFTER_MS", "400")) / 1000)
    os._exit(9)


threading.Thread(target=_die_later, daemon=True).start()


def record(msg: rmqrun.Message) -> None:
    _write("ok", [msg], next(_calls))
