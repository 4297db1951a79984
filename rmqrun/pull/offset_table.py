"""The pull consumer's local table of group offsets.

Two kinds of entries share it: offsets read from the broker (cached, so
``fetch_consume_offset(mq, from_store=False)`` need not ask again) and offsets
the program set with ``update_consume_offset``. Only the second kind is
written back by ``persist``: writing back a value merely read could undo a
commit another client (a Spark driver, a push consumer) made in between.
"""

from __future__ import annotations

from rmqrun.model import MessageQueue


class OffsetTable:
    def __init__(self) -> None:
        self._offsets: dict[MessageQueue, int] = {}
        self._updated: set[MessageQueue] = set()

    def get(self, mq: MessageQueue) -> int | None:
        return self._offsets.get(mq)

    def cache(self, mq: MessageQueue, offset: int) -> None:
        """An offset read from the broker; a pending update of this queue wins over it."""
        if mq not in self._updated:
            self._offsets[mq] = offset

    def update(self, mq: MessageQueue, offset: int) -> None:
        """The program's offset for ``mq``; kept until persisted (not increase-only, as in Java)."""
        self._offsets[mq] = offset
        self._updated.add(mq)

    def updated(self) -> dict[MessageQueue, int]:
        """Offsets set by the program and not yet persisted."""
        return {mq: self._offsets[mq] for mq in sorted(self._updated)}

    def persisted(self, mq: MessageQueue, offset: int) -> None:
        """``offset`` reached the broker; the queue is clean unless it was updated again meanwhile."""
        if self._offsets.get(mq) == offset:
            self._updated.discard(mq)
