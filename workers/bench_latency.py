"""A handler that records store-to-handler latency, for ``scripts/bench_report.py`` (``workers.bench_latency:handle``).

Each message burns ``RMQRUN_HANDLER_CPU_MS`` of CPU (as ``workers.cpu``) and
appends one line ``<store timestamp ms> <store-to-handler ms>`` to ``$RMQRUN_HANDLER_LATENCY_DIR/<pid>.txt``.
The latency is taken when the handler is entered, before the CPU burn, so it is
the time the message spent in the broker, the supervisor and the pipe: what the
framework adds, not what the handler costs. Broker and worker share the
machine's clock (loopback only), so the difference of the two timestamps is
meaningful to the millisecond.
"""

from __future__ import annotations

import os
import time

import rmqrun
from workers.cpu import burn

CPU_MS = float(os.environ.get("RMQRUN_HANDLER_CPU_MS", "0"))
_DIR = os.environ.get("RMQRUN_HANDLER_LATENCY_DIR", "")
# line-buffered: a worker stopped by SIGTERM loses at most the line being written
_OUT = open(os.path.join(_DIR, f"{os.getpid()}.txt"), "a", buffering=1) if _DIR else None  # noqa: SIM115


def handle(msg: rmqrun.Message) -> None:
    """Record this message's store-to-handler latency, then burn the configured CPU."""
    lat = time.time() * 1000.0 - msg.store_timestamp
    if _OUT is not None:
        _OUT.write(f"{msg.store_timestamp} {lat:.3f}\n")
    if CPU_MS:
        burn(CPU_MS)
