"""Held pulls: long polling (``PullRequestHoldService``).

A pull that finds nothing new and carries the suspend bit is parked here
instead of answered. It is re-run (never allowed to park again) as soon as a
message its subscription matches arrives in its queue, or when its suspend
timeout passes, whichever comes first; the re-run's answer is what the client
gets (FOUND, or PULL_NOT_FOUND at the timeout).

RocketMQ checks timeouts only every 5 s, so a 15 s long poll may last 20 s;
here each held pull has its own timer and is answered at its deadline.
Arrivals are matched by the consume-queue tags code, like the real broker, so
a message for another tag does not wake a filtered consumer.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Callable

from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand


@dataclass(eq=False, slots=True)
class HeldPull:
    conn: Connection
    request: RemotingCommand
    topic: str
    queue_id: int
    offset: int
    subscription: SubscriptionData
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)

    def matches(self, tags_code: int | None) -> bool:
        return self.subscription.matches_tags_code(tags_code)


#: Re-runs a held pull and sends its answer.
Replay = Callable[[HeldPull], None]


class PullHoldService:
    def __init__(self, replay: Replay) -> None:
        self._replay = replay
        self._held: dict[tuple[str, int], list[HeldPull]] = {}
        self._by_conn: dict[Connection, set[HeldPull]] = {}

    def __len__(self) -> int:
        return sum(len(v) for v in self._held.values())

    def held_on(self, topic: str, queue_id: int) -> int:
        """How many pulls wait on one queue (tests wait for a pull to be held, not for time to pass)."""
        return len(self._held.get((topic, queue_id), ()))

    def suspend(self, held: HeldPull, timeout_ms: int) -> None:
        loop = asyncio.get_running_loop()
        held.timer = loop.call_later(max(0, timeout_ms) / 1000.0, self._expire, held)
        self._held.setdefault((held.topic, held.queue_id), []).append(held)
        self._by_conn.setdefault(held.conn, set()).add(held)

    def notify_arrival(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None) -> None:
        """A message was stored in ``topic``/``queue_id``; ``max_offset`` is the queue's new end."""
        waiting = self._held.get((topic, queue_id))
        if not waiting:
            return
        keep: list[HeldPull] = []
        wake: list[HeldPull] = []
        for held in waiting:
            if max_offset > held.offset and held.matches(tags_code):
                wake.append(held)
            else:
                keep.append(held)
        if keep:
            self._held[(topic, queue_id)] = keep
        else:
            del self._held[(topic, queue_id)]
        for held in wake:
            self._release(held)
            self._replay(held)

    def _expire(self, held: HeldPull) -> None:
        held.timer = None
        waiting = self._held.get((held.topic, held.queue_id))
        if waiting is None or held not in waiting:
            return
        waiting.remove(held)
        if not waiting:
            del self._held[(held.topic, held.queue_id)]
        self._release(held)
        self._replay(held)

    def _release(self, held: HeldPull) -> None:
        if held.timer is not None:
            held.timer.cancel()
            held.timer = None
        mine = self._by_conn.get(held.conn)
        if mine is not None:
            mine.discard(held)
            if not mine:
                del self._by_conn[held.conn]

    def connection_closed(self, conn: Connection) -> None:
        """Forget the pulls of a closed connection: nobody is left to answer."""
        for held in self._by_conn.pop(conn, set()):
            if held.timer is not None:
                held.timer.cancel()
                held.timer = None
            waiting = self._held.get((held.topic, held.queue_id))
            if waiting is not None and held in waiting:
                waiting.remove(held)
                if not waiting:
                    del self._held[(held.topic, held.queue_id)]

    def clear(self) -> None:
        """Forget every held pull (shutdown: like RocketMQ, they are never answered)."""
        for waiting in self._held.values():
            for held in waiting:
                if held.timer is not None:
                    held.timer.cancel()
                    held.timer = None
        self._held.clear()
        self._by_conn.clear()
