"""Moving counters behind the admin answers' TPS columns (``BrokerStatsManager``, much reduced).

``mqadmin consumerProgress`` shows a group's consume TPS, ``brokerStatus`` and
``clusterList`` the broker's put/get TPS and today's totals. Java keeps
per-minute snapshots of many counters; the embedded broker keeps, per key, the
events of the last minute (timestamps with counts), which is enough for "per
second over the last minute" and costs nothing when nobody asks.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

WINDOW_S = 60.0


@dataclass(slots=True)
class _Window:
    events: deque[tuple[float, int]] = field(default_factory=deque)
    total: int = 0

    def add(self, n: int, now: float) -> None:
        self.events.append((now, n))
        self.total += n
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self.events and now - self.events[0][0] > WINDOW_S:
            self.events.popleft()

    def tps(self, now: float) -> float:
        self._trim(now)
        return sum(n for _, n in self.events) / WINDOW_S


class BrokerStats:
    """Puts, gets and per-(group, topic) gets; TPS over the last minute, totals since start."""

    def __init__(self) -> None:
        self.boot_ms = int(time.time() * 1000)
        self._puts = _Window()
        self._gets = _Window()
        self._misses = _Window()
        self._group_gets: dict[tuple[str, str], _Window] = {}
        self.put_bytes = 0

    def on_put(self, n: int, size: int) -> None:
        self._puts.add(n, time.monotonic())
        self.put_bytes += size

    def on_get(self, group: str, topic: str, n: int) -> None:
        now = time.monotonic()
        if n <= 0:
            self._misses.add(1, now)
            return
        self._gets.add(n, now)
        self._group_gets.setdefault((group, topic), _Window()).add(n, now)

    @property
    def put_total(self) -> int:
        return self._puts.total

    @property
    def get_total(self) -> int:
        return self._gets.total

    def put_tps(self) -> float:
        return self._puts.tps(time.monotonic())

    def get_tps(self) -> float:
        return self._gets.tps(time.monotonic())

    def miss_tps(self) -> float:
        return self._misses.tps(time.monotonic())

    def consume_tps(self, group: str, topic: str) -> float:
        w = self._group_gets.get((group, topic))
        return w.tps(time.monotonic()) if w is not None else 0.0
