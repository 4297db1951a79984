"""Orderly-consumption queue locks (``RebalanceLockManager``).

Per group, a queue belongs to at most one client id at a time. The owner
renews by locking again (the Java client every 20 s); a lock not renewed for
``lock_max_live_ms`` (60 s) is expired and the next client to ask gets it.
Only the owner can unlock. Locks live in memory only, as in RocketMQ: after a
broker restart every orderly consumer simply locks again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable

from rmqrun.model import MessageQueue


@dataclass(slots=True)
class LockEntry:
    client_id: str
    last_update: float


class RebalanceLockManager:
    def __init__(self, lock_max_live_ms: int = 60_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_live_s = lock_max_live_ms / 1000.0
        self._clock = clock
        self._table: dict[str, dict[MessageQueue, LockEntry]] = {}

    def _expired(self, entry: LockEntry, now: float) -> bool:
        return now - entry.last_update > self.max_live_s

    def try_lock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> list[MessageQueue]:
        """The queues now held by ``client_id``: already its own (renewed), free, or expired.

        Order: renewals first, then new grants, each in request order (the set
        Java builds the answer from fills in that order).
        """
        now = self._clock()
        table = self._table.setdefault(group, {})
        renewed: list[MessageQueue] = []
        granted: list[MessageQueue] = []
        for mq in dict.fromkeys(mqs):
            entry = table.get(mq)
            if entry is not None and entry.client_id == client_id and not self._expired(entry, now):
                entry.last_update = now
                renewed.append(mq)
            elif entry is None or self._expired(entry, now):
                table[mq] = LockEntry(client_id, now)
                granted.append(mq)
        return renewed + granted

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> list[MessageQueue]:
        """Release the queues ``client_id`` holds; returns the ones actually released."""
        table = self._table.get(group)
        if not table:
            return []
        released = []
        for mq in mqs:
            entry = table.get(mq)
            if entry is not None and entry.client_id == client_id:
                del table[mq]
                released.append(mq)
        if not table:
            del self._table[group]
        return released

    def owner(self, group: str, mq: MessageQueue) -> str | None:
        """The live owner of a queue, or None."""
        entry = self._table.get(group, {}).get(mq)
        if entry is None or self._expired(entry, self._clock()):
            return None
        return entry.client_id

    def has_live_locks(self, group: str) -> bool:
        now = self._clock()
        return any(not self._expired(e, now) for e in self._table.get(group, {}).values())
