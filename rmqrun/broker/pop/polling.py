"""Long polling of POP and NOTIFICATION requests (``PopLongPollingService``), on :mod:`rmqrun.broker.longpoll`.

A POP that finds nothing is held under the key ``topic@group`` and its queue id (-1 for all queues) in a
:class:`PullHoldService` of its own, with offset -1 so that any arrival wakes it. The broker's store calls
:meth:`PopPolling.on_arrival` for every append, whatever the path (a send, a revive into the pop retry topic,
a delayed message coming due, a send-back), and it wakes the requests watching that topic: those on the
queue and those on all queues; an arrival in a pop retry topic wakes every request of its group and topic.
An order-mode ack wakes the queue's requests through :meth:`PopPolling.wake`.

The woken request is run again by the processor; if it still finds nothing (another consumer was faster,
or the tag did not match) it is held again for the rest of its poll time. At most ``max_per_key`` requests
wait per key (``maxPopPollingSize``); one more is answered POLLING_FULL.
"""

from __future__ import annotations

import time
from typing import Callable

from rmqrun.broker.longpoll import HeldPull, PullHoldService
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.topic_names import is_retry_topic, pop_retry_topic

#: Requests held per topic@group@queue before POLLING_FULL (RocketMQ's maxPopPollingSize is 100000).
MAX_POLLING_PER_KEY = 1024


def poll_key(topic: str, group: str) -> str:
    return f"{topic}@{group}"


class PopPolling:
    def __init__(self, replay: Callable[[HeldPull], None], *, max_per_key: int = MAX_POLLING_PER_KEY) -> None:
        self.hold = PullHoldService(replay)
        self.max_per_key = max_per_key
        #: stored topic -> poll key -> queue ids held on
        self._watch: dict[str, dict[str, set[int]]] = {}
        #: id(request) -> monotonic deadline of its whole poll time, and the ids held per connection
        self._deadlines: dict[int, float] = {}
        self._ids_by_conn: dict[Connection, set[int]] = {}

    def polling_num(self, topic: str, group: str, queue_id: int) -> int:
        return self.hold.held_on(poll_key(topic, group), queue_id)

    def suspend(self, conn: Connection, cmd: RemotingCommand, topic: str, group: str, queue_id: int,
                sub: SubscriptionData, timeout_ms: int, *, deadline: float | None = None) -> bool:
        """Hold ``cmd``; False when too many already wait on the key (POLLING_FULL)."""
        key = poll_key(topic, group)
        if self.hold.held_on(key, queue_id) >= self.max_per_key:
            return False
        for watched in (topic, pop_retry_topic(group, topic)):
            self._watch.setdefault(watched, {}).setdefault(key, set()).add(queue_id)
        self._deadlines[id(cmd)] = deadline if deadline is not None else time.monotonic() + timeout_ms / 1000
        self._ids_by_conn.setdefault(conn, set()).add(id(cmd))
        self.hold.suspend(HeldPull(conn, cmd, key, queue_id, -1, sub), timeout_ms)
        return True

    def take_deadline(self, cmd: RemotingCommand, conn: Connection | None = None) -> float:
        """The deadline a woken request was held with (now if unknown); forgets it."""
        if conn is not None:
            ids = self._ids_by_conn.get(conn)
            if ids is not None:
                ids.discard(id(cmd))
                if not ids:
                    del self._ids_by_conn[conn]
        return self._deadlines.pop(id(cmd), time.monotonic())

    def on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        watchers = self._watch.get(topic)
        if not watchers:
            return
        is_retry = is_retry_topic(topic)
        for key, qids in list(watchers.items()):
            for qid in list(qids):
                if self.hold.held_on(key, qid) == 0:
                    qids.discard(qid)
                elif is_retry or qid < 0 or qid == queue_id:
                    self.hold.notify_arrival(key, qid, max_offset)
            if not qids:
                del watchers[key]
        if not watchers:
            del self._watch[topic]

    def wake(self, topic: str, group: str, queue_id: int) -> None:
        """Wake the requests of one queue and of all queues (an order-mode queue was unblocked)."""
        key = poll_key(topic, group)
        for qid in (queue_id, -1):
            self.hold.notify_arrival(key, qid, 1 << 62)

    def connection_closed(self, conn: Connection) -> None:
        self.hold.connection_closed(conn)
        for ident in self._ids_by_conn.pop(conn, ()):
            self._deadlines.pop(ident, None)

    def clear(self) -> None:
        self.hold.clear()
        self._watch.clear()
        self._deadlines.clear()
        self._ids_by_conn.clear()
