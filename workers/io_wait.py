"""Handlers that mostly wait, as one calling another service does: for the worker-class benchmark.

``handle`` blocks in ``time.sleep`` (the ``threads`` class, or ``process``), ``handle_async``
awaits ``asyncio.sleep`` (the ``asyncio`` class), each ``RMQRUN_HANDLER_SLEEP_MS`` (default 50 ms)
per message; ``cpu_async`` is ``workers.cpu:handle`` as an ``async def`` (CPU-bound on the loop), so
the CPU-bound row can run under every class. Read at import, i.e. once per worker.
"""

from __future__ import annotations

import asyncio
import os
import time

import rmqrun
from workers.cpu import CPU_MS, burn

SLEEP_S = float(os.environ.get("RMQRUN_HANDLER_SLEEP_MS", "50")) / 1000.0


def handle(msg: rmqrun.Message) -> None:
    """Wait ``RMQRUN_HANDLER_SLEEP_MS`` in a blocking call (``workers.io_wait:handle``)."""
    time.sleep(SLEEP_S)


async def handle_async(msg: rmqrun.Message) -> None:
    """Await ``RMQRUN_HANDLER_SLEEP_MS`` (``workers.io_wait:handle_async``)."""
    await asyncio.sleep(SLEEP_S)


async def cpu_async(msg: rmqrun.Message) -> None:
    """Burn ``RMQRUN_HANDLER_CPU_MS`` of CPU without awaiting (``workers.io_wait:cpu_async``)."""
    burn(CPU_MS)
