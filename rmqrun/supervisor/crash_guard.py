"""The crash-loop guard: how many unexplained worker deaths the pool tolerates per time window.

A worker that dies for a reason no message explains (at boot, or between
handler calls) is replaced at once; if that keeps happening, replacing it
again only burns CPU and floods the log, so the pool gives up instead. The
rule is a sliding window, like billiard's restart-frequency limit: more than
``limit`` deaths within ``window`` seconds trips it. It is its own object so
the rule can be read, and tested, without a pool or a process.
"""

from __future__ import annotations

from collections import deque


class CrashGuard:
    """Counts deaths in a sliding window; :meth:`record` says whether the limit is now exceeded."""

    def __init__(self, limit: int, window: float) -> None:
        self.limit = limit
        self.window = window
        self._deaths: deque[float] = deque()

    def record(self, now: float) -> bool:
        """Count a death at ``now`` (a monotonic clock); True when more than ``limit`` fall in the window.

        Deaths older than ``now - window`` are forgotten first, so a slow trickle
        of crashes over a long run never adds up to a crash loop.
        """
        deaths = self._deaths
        deaths.append(now)
        while deaths and deaths[0] < now - self.window:
            deaths.popleft()
        return len(deaths) > self.limit

    @property
    def count(self) -> int:
        """Deaths in the window as of the last :meth:`record` (older ones are dropped only then)."""
        return len(self._deaths)

    def reset(self) -> None:
        """Forget every death counted so far."""
        self._deaths.clear()
