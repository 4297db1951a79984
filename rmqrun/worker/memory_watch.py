"""A warning when a worker's memory keeps growing and nothing will recycle it.

With ``max_memory_per_worker`` unset, a handler that leaks 50 MB per call
grew a worker to 333 MB in 6 calls and nobody said a word. This watch reads
the worker's RSS at most once a second, between handler calls (one ``pread``
of ``/proc/self/statm``), against the RSS after the first call: when it has
doubled and grown by at least ``min_growth`` bytes, one warning says so and
names the settings that would recycle the worker; the next one waits for the
next doubling, so a steady leak is told a few times, not per message.

Between calls, not only between batches: one batch (a job of the supervisor's)
may carry several calls, and sampled once per batch, the base of a job of three
leaking calls was already three leaks high, so the doubling came only after six
more. The process worker's call loop asks :attr:`GrowthWatch.next_at` against the
clock read it makes per call anyway, so a call costs one float comparison; the
``threads`` and ``asyncio`` classes sample when a batch ends.
"""

from __future__ import annotations

import os
import time
from typing import Callable

from loguru import logger

__all__ = ["GrowthWatch", "read_rss"]

MIN_GROWTH = 64 << 20  # growth below this is not worth a line (imports, caches warming up)
_PERIOD_S = 1.0


def read_rss() -> Callable[[], int] | None:
    """A function returning this process's RSS in bytes: one ``pread`` of ``/proc/self/statm``, a few
    microseconds. None where /proc is missing (the caller picks its fallback)."""
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    try:
        fd = os.open("/proc/self/statm", os.O_RDONLY)
    except OSError:
        return None
    return lambda: int(os.pread(fd, 128, 0).split()[1]) * page


class GrowthWatch:
    """Call :meth:`sample` after handler calls with the messages handled so far."""

    def __init__(self, rss: Callable[[], int] | None = None, *, min_growth: int = MIN_GROWTH,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._rss = rss or read_rss() or (lambda: 0)  # no /proc: no watch
        self._clock = clock
        self._min_growth = min_growth
        #: the monotonic time from which the next :meth:`sample` reads RSS (earlier ones return at once)
        self.next_at = 0.0
        self._base: int | None = None
        self._base_handled = 0
        self._warn_above = 0

    def sample(self, handled: int) -> float:
        """After a call: ``handled`` is how many messages this worker's calls have handled so far.

        Returns :attr:`next_at`.
        """
        now = self._clock()
        if now >= self.next_at:
            self.next_at = now + _PERIOD_S
            self._look(self._rss(), handled)
        return self.next_at

    def _look(self, rss: int, handled: int) -> None:
        if rss <= 0:
            return
        if self._base is None:
            self._base, self._base_handled = rss, handled
        elif rss > self._warn_above:
            logger.warning("worker RSS grew from {} MiB to {} MiB over {} messages and nothing recycles it; if the "
                           "handler leaks, set max_memory_per_worker (--max-memory-per-worker 512MiB) or "
                           "max_messages_per_worker (--max-messages-per-worker N)", self._base >> 20, rss >> 20,
                           handled - self._base_handled)
        else:
            return
        self._warn_above = max(2 * rss, rss + self._min_growth)
