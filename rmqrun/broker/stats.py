"""Moving counters behind the admin answers' TPS columns (``BrokerStatsManager``, much reduced).

``mqadmin consumerProgress`` shows a group's consume TPS, ``brokerStatus`` and
``clusterList`` the broker's put/get TPS and today's totals. Java keeps
per-minute snapshots of many counters; the embedded broker keeps, per key, the
events of the last minute (timestamps with counts), which is enough for "per
second over the last minute" and costs nothing when nobody asks.

VIEW_BROKER_STATS_DATA (``mqadmin statsAll``, ``exportMetrics``) asks for named statistics
(``TOPIC_PUT_NUMS`` of a topic, ``GROUP_GET_NUMS`` of ``topic@group``, ...) over the last minute,
hour and day, as Java's ``StatsItem`` keeps them: a sum, a rate and a per-call average. They live in
:class:`StatsTable`, bucketed (10 s buckets for the minute, 1 min for the hour, 1 h for the day), so
an item costs at most 90 buckets however busy it is; an item nobody wrote does not exist, and the
answer says so, as Java's does.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Mapping

from rmqrun.protocol.admin import (
    BROKER_GET_NUMS, BROKER_PUT_NUMS, GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS, TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE, BrokerStatsData, StatsWindow, stats_key,
)

WINDOW_S = 60.0

#: BrokerStatsManager's POP statistics (5.x): acks per topic@group and broker-wide, checkpoints,
#: messages the revive service put back into a pop retry topic.
GROUP_ACK_NUMS = "GROUP_ACK_NUMS"
BROKER_ACK_NUMS = "BROKER_ACK_NUMS"
GROUP_CK_NUMS = "GROUP_CK_NUMS"
BROKER_CK_NUMS = "BROKER_CK_NUMS"
POP_REVIVE_NUMS = "POP_REVIVE_NUMS"


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


@dataclass(slots=True)
class _Buckets:
    """Value and call count per ``width`` seconds, the last ``count`` buckets (one window of a StatsItem)."""

    width: float
    count: int
    buckets: deque[list[float]] = field(default_factory=deque)  # [bucket start, value, calls]

    def add(self, value: int, calls: int, now: float) -> None:
        start = now - now % self.width
        if self.buckets and self.buckets[-1][0] == start:
            self.buckets[-1][1] += value
            self.buckets[-1][2] += calls
        else:
            self.buckets.append([start, value, calls])
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self.buckets and self.buckets[0][0] <= now - self.width * self.count:
            self.buckets.popleft()

    def window(self, now: float, age: float) -> StatsWindow:
        """Sum, per second and per call over the window (per second over the item's age while younger)."""
        self._trim(now)
        total = int(sum(b[1] for b in self.buckets))
        calls = sum(b[2] for b in self.buckets)
        seconds = max(min(self.width * self.count, age), self.width)
        return StatsWindow(total, total / seconds, total / calls if calls else 0.0)


class StatsItem:
    """One named statistic of one key (Java ``StatsItem``): the last minute, hour and day."""

    __slots__ = ("created", "minute", "hour", "day", "_since", "_until", "_open")

    def __init__(self, now: float) -> None:
        self.created = now
        self.minute = _Buckets(10.0, 6)
        self.hour = _Buckets(60.0, 60)
        self.day = _Buckets(3600.0, 24)
        #: [_since, _until): the 10 s bucket the last add went to; the minute's, hour's and day's open buckets
        #: (a 10 s bucket lies inside one minute and one hour: the widths divide each other)
        self._since = self._until = 0.0
        self._open: tuple[list[float], ...] = ()

    def add(self, value: int, calls: int, now: float) -> None:
        if self._since <= now < self._until:  # the same 10 s as the last add: its buckets are still the open ones
            for b in self._open:
                b[1] += value
                b[2] += calls
            return
        for w in (self.minute, self.hour, self.day):
            w.add(value, calls, now)
        last = self.minute.buckets[-1]
        self._since, self._until = last[0], last[0] + self.minute.width
        self._open = (last, self.hour.buckets[-1], self.day.buckets[-1])

    def data(self, now: float) -> BrokerStatsData:
        self._until = 0.0  # the windows trim their buckets here: the next add finds its buckets through them
        age = now - self.created
        return BrokerStatsData(self.minute.window(now, age), self.hour.window(now, age), self.day.window(now, age))


class StatsTable:
    """Statistics by (name, key), created by their first value (``BrokerStatsManager.statsTable``)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._items: dict[tuple[str, str], StatsItem] = {}
        self._clock = clock

    def add(self, name: str, key: str, value: int, calls: int = 1) -> None:
        now = self._clock()
        self.item(name, key, now).add(value, calls, now)

    def item(self, name: str, key: str, now: float | None = None) -> StatsItem:
        """The statistic itself, made if new (at ``now``, else this table's clock; nothing removes one): a hot
        path keeps it and adds to it directly, on this table's clock."""
        item = self._items.get((name, key))
        if item is None:
            item = self._items[(name, key)] = StatsItem(self._clock() if now is None else now)
        return item

    def touch(self, name: str, key: str) -> None:
        """Make the statistic exist (reading 0 until a value comes), so it is reported rather than "not exist"."""
        self.item(name, key)

    def get(self, name: str, key: str) -> BrokerStatsData | None:
        item = self._items.get((name, key))
        return item.data(self._clock()) if item is not None else None


class BrokerStats:
    """Puts, gets and per-(group, topic) gets; TPS over the last minute, totals since start.

    :attr:`table` holds the named statistics of VIEW_BROKER_STATS_DATA, fed where Java feeds them: a
    producer's send (:meth:`on_send`, not the schedule service's or a send-back's re-put), a pull that
    found messages, a send-back.
    """

    def __init__(self, cluster_name: str = "DefaultCluster") -> None:
        self.boot_ms = int(time.time() * 1000)
        self._puts = _Window()
        self._gets = _Window()
        self._misses = _Window()
        self._group_gets: dict[tuple[str, str], _Window] = {}
        self.put_bytes = 0
        #: the key of the broker-wide statistics (BROKER_PUT_NUMS, BROKER_GET_NUMS), as in Java
        self.cluster_name = cluster_name
        self.table = StatsTable()
        #: a pop's statistics by (group, topic), found once (see :meth:`on_pop`)
        self._pop_gets: dict[tuple[str, str], tuple[_Window, StatsItem, StatsItem, StatsItem]] = {}
        #: a checkpoint's or an ack's statistics of the group and the broker by (name, group, real topic)
        self._pairs: dict[tuple[str, str, str], tuple[StatsItem, StatsItem]] = {}

    def on_put(self, n: int, size: int) -> None:
        self._puts.add(n, time.monotonic())
        self.put_bytes += size

    def on_send(self, topic: str, n: int, size: int) -> None:
        """A producer's send of ``n`` messages stored under ``topic`` (the schedule topic for a delayed one)."""
        self.table.add(TOPIC_PUT_NUMS, topic, n)
        self.table.add(TOPIC_PUT_SIZE, topic, size)
        self.table.add(BROKER_PUT_NUMS, self.cluster_name, n)

    def on_get(self, group: str, topic: str, n: int, size: int = 0) -> None:
        now = time.monotonic()
        if n <= 0:
            self._misses.add(1, now)
            return
        self._gets.add(n, now)
        window = self._group_gets.get((group, topic))
        if window is None:
            window = self._group_gets[(group, topic)] = _Window()
        window.add(n, now)
        key = stats_key(topic, group)
        self.table.add(GROUP_GET_NUMS, key, n)
        self.table.add(GROUP_GET_SIZE, key, size)
        self.table.add(BROKER_GET_NUMS, self.cluster_name, n)

    def on_send_back(self, group: str, topic: str) -> None:
        """A message of ``topic`` sent back by ``group`` for a retry (SNDBCK_PUT_NUMS)."""
        self.table.add(SNDBCK_PUT_NUMS, stats_key(topic, group), 1)

    def on_pop_ack(self, group: str, topic: str, n: int) -> None:
        """``n`` popped messages of ``topic`` acked by ``group`` (its real topic: the retry topic's for a revived one)."""
        self.on_pop_acks(group, topic, n, 1)

    def on_pop(self, group: str, topic: str, n: int, size: int, checkpoints: Mapping[str, int]) -> None:
        """A pop that found ``n`` messages of ``topic`` (``size`` bytes) and wrote ``checkpoints`` (how many per real
        topic): what :meth:`on_get` counts, and the checkpoints as ``k`` calls of one each (Java adds one per
        checkpoint), in one call with one clock read, the items found through one look-up (a pop comes per 32
        messages; the table's clock is ``time.monotonic``). From a group's first checkpoint of a topic on, its
        revive count there is known, 0 until one is revived: rmqrun status shows "last hour 0" only where a broker
        says so (an Apache broker has no such item: unknown)."""
        now = time.monotonic()
        self._gets.add(n, now)
        items = self._pop_gets.get((group, topic))
        if items is None:
            key = stats_key(topic, group)
            items = self._pop_gets[(group, topic)] = (
                self._group_gets.setdefault((group, topic), _Window()), self.table.item(GROUP_GET_NUMS, key),
                self.table.item(GROUP_GET_SIZE, key), self.table.item(BROKER_GET_NUMS, self.cluster_name))
        window, nums, sizes, broker_nums = items
        window.add(n, now)
        nums.add(n, 1, now)
        sizes.add(size, 1, now)
        broker_nums.add(n, 1, now)
        for ck_topic, k in checkpoints.items():
            group_cks, broker_cks = self._pair(GROUP_CK_NUMS, BROKER_CK_NUMS, group, ck_topic)
            group_cks.add(k, k, now)
            broker_cks.add(k, k, now)

    def _pair(self, name: str, broker_name: str, group: str, topic: str) -> tuple[StatsItem, StatsItem]:
        """The statistic ``name`` of ``topic@group`` and ``broker_name`` of the broker, made if new (a checkpoint's
        makes the group's revive count of the topic known: see :meth:`on_pop`)."""
        pair = self._pairs.get((name, group, topic))
        if pair is None:
            key = stats_key(topic, group)
            pair = self._pairs[(name, group, topic)] = (self.table.item(name, key),
                                                        self.table.item(broker_name, self.cluster_name))
            if name == GROUP_CK_NUMS:
                self.table.touch(POP_REVIVE_NUMS, key)
        return pair

    def on_pop_acks(self, group: str, topic: str, n: int, calls: int) -> None:
        """``calls`` acks of ``topic`` by ``group`` that acked ``n`` messages in all (a batch ack's entries of one
        (group, topic) counted once: the statistics read as ``calls`` calls of :meth:`on_pop_ack`)."""
        now = time.monotonic()
        group_acks, broker_acks = self._pair(GROUP_ACK_NUMS, BROKER_ACK_NUMS, group, topic)
        group_acks.add(n, calls, now)
        broker_acks.add(n, calls, now)

    def on_pop_revive(self, group: str, topic: str, n: int) -> None:
        self.table.add(POP_REVIVE_NUMS, stats_key(topic, group), n)

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
