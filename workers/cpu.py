"""A CPU-bound handler whose cost is set by ``RMQRUN_HANDLER_CPU_MS`` (default 1 ms per message).

The cost is measured in this thread's CPU time, not wall time, so a handler
that shares a core with something else still burns the same amount of work.
The variable is read at import, i.e. once per worker.
"""

from __future__ import annotations

import os
import time

import rmqrun

CPU_MS = float(os.environ.get("RMQRUN_HANDLER_CPU_MS", "1"))


def burn(ms: float) -> int:
    """Spin for ``ms`` milliseconds of thread CPU time; returns the loop count (so it is not optimised out)."""
    end = time.thread_time() + ms / 1000.0
    n = 0
    while time.thread_time() < end:
        n += 1
    return n


def handle(msg: rmqrun.Message) -> None:
    """Burn RMQRUN_HANDLER_CPU_MS of CPU for one message (``workers.cpu:handle``)."""
    burn(CPU_MS)


@rmqrun.batch
def handle_batch(msgs: list[rmqrun.Message]) -> None:
    """Burn RMQRUN_HANDLER_CPU_MS per message of the list (``workers.cpu:handle_batch``)."""
    burn(CPU_MS * len(msgs))
