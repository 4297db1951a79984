"""Orderly POP's per-queue state (``ConsumerOrderInfoManager``): which offsets were popped, acked, redelivered.

An orderly POP (``order=true``) hands out a queue's messages one batch at a
time: while any message of the last batch is neither acknowledged nor visible
again, the queue is *blocked* for every other request of the group
(:meth:`OrderInfoTable.check_block`). The same request retried (same
``attemptId``) is not blocked: it gets the batch again. When the batch comes
back (invisible time over, or a change-invisible-time that made it visible),
the next pop of the queue starts at the committed offset, i.e. at the first
unacknowledged message, and the messages popped a second time carry a higher
redelivery count in ``orderCountInfo`` (:meth:`OrderInfoTable.update`), which
the client turns into ``reconsumeTimes``. Each ACK marks its offset and says
which consumer offset to commit: the first unacknowledged offset of the batch,
or one past its last when all are acknowledged
(:meth:`OrderInfoTable.commit_and_next`); so the consumer offset never moves
past a message that is still out.

All times are wall-clock milliseconds (a popTime is one), passed in by the
caller or read from ``clock``, so the state means the same after a restart.

**Persistence.** The state is saved, not rebuilt: nothing in the store says
which offsets a client holds or until when, and a broker that forgot would
hand a blocked queue's messages to a second client at once after a restart,
breaking the order the mode exists for. :meth:`OrderInfoTable.flush` writes
the table (Java's ``consumerOrderInfo.json`` layout) when it changed; the
owner calls it on a timer and at stop, as Java persists its ConfigManagers
every few seconds. A kill -9 loses at most the changes since the last flush:
a queue may then unblock early (its batch is popped again, counted once more),
never block for ever, since every entry expires with its invisible time.
Entries idle for a day, or of a queue, topic or group that is gone, are
dropped by :meth:`OrderInfoTable.clean`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from rmqrun.broker.store.json_file import JsonFile
from rmqrun.protocol.pop import OrderCountKey, retry_flag_of

FILE_NAME = "consumerOrderInfo.json"
#: ConsumerOrderInfoManager.CLEAN_SPAN_FROM_LAST: an entry not touched for a day is dropped
IDLE_EXPIRY_MS = 24 * 3600 * 1000


def _now_ms() -> int:
    return int(time.time() * 1000)


class CommitStatus(str, Enum):
    #: commit ``offset`` as the group's consumer offset (and wake the queue's pollers)
    COMMIT = "commit"
    #: the ACK names an offset this queue's batch does not hold: answer MESSAGE_ILLEGAL
    ILLEGAL = "illegal"
    #: the ACK is for an older pop of the queue (its popTime is not the batch's): commit nothing
    STALE = "stale"


@dataclass(frozen=True, slots=True)
class Commit:
    status: CommitStatus
    #: the consumer offset to commit (COMMIT only)
    offset: int | None = None


@dataclass(slots=True)
class OrderInfo:
    """The last batch popped from one queue by one group."""

    pop_time: int
    invisible_time: int
    #: the queue offsets popped, ascending
    offsets: tuple[int, ...]
    attempt_id: str | None = None
    acked: set[int] = field(default_factory=set)
    #: offset -> when it becomes visible again, where a change-invisible-time moved it
    next_visible: dict[int, int] = field(default_factory=dict)
    #: offset -> how many times it was handed out before this batch (only counts > 0)
    consumed: dict[int, int] = field(default_factory=dict)
    last_touched: int = 0

    def visible_at(self, offset: int) -> int:
        return self.next_visible.get(offset, self.pop_time + self.invisible_time)

    def outstanding(self) -> list[int]:
        return [o for o in self.offsets if o not in self.acked]

    def blocks(self, attempt_id: str | None, now: int) -> bool:
        if not self.offsets or (self.attempt_id is not None and self.attempt_id == attempt_id):
            return False
        return any(now < self.visible_at(o) for o in self.outstanding())

    def next_offset(self) -> int:
        """The first offset not acked, or one past the batch when every offset is."""
        out = self.outstanding()
        return out[0] if out else self.offsets[-1] + 1

    # Java's layout: "o" is [first, o1 - first, o2 - first, ...], "cm" the acked indexes as a bit mask.
    def to_json(self) -> dict[str, Any]:
        first = self.offsets[0] if self.offsets else 0
        out: dict[str, Any] = {
            "popTime": self.pop_time, "i": self.invisible_time,
            "o": [first] + [o - first for o in self.offsets[1:]] if self.offsets else [],
            "cm": sum(1 << i for i, o in enumerate(self.offsets) if o in self.acked), "l": self.last_touched}
        if self.attempt_id is not None:
            out["a"] = self.attempt_id
        if self.next_visible:
            out["ot"] = {str(o): t for o, t in sorted(self.next_visible.items())}
        if self.consumed:
            out["oc"] = {str(o): n for o, n in sorted(self.consumed.items())}
        return out

    @classmethod
    def from_json(cls, obj: Any) -> "OrderInfo":
        if not isinstance(obj, dict):
            raise TypeError(f"not an order info object: {obj!r}")
        raw = [int(v) for v in obj.get("o") or ()]
        offsets = tuple(raw[:1] + [raw[0] + d for d in raw[1:]])
        mask = int(obj.get("cm", 0))
        attempt = obj.get("a")
        return cls(int(obj.get("popTime", 0)), int(obj.get("i") or 0), offsets,
                   None if attempt is None else str(attempt),
                   {o for i, o in enumerate(offsets) if mask >> i & 1},
                   {int(k): int(v) for k, v in (obj.get("ot") or {}).items()},
                   {int(k): int(v) for k, v in (obj.get("oc") or {}).items()}, int(obj.get("l", 0)))


Key = tuple[str, str]  # (topic, group); the topic is the one popped (a pop retry topic is its own key)


class OrderInfoTable:
    """Every (topic, group, queue)'s last orderly batch; see the module docstring."""

    def __init__(self, path: Path | None = None, *, clock: Callable[[], int] = _now_ms) -> None:
        self._file = JsonFile(path) if path is not None else None
        self._clock = clock
        self._table: dict[Key, dict[int, OrderInfo]] = {}
        self._dirty = False
        #: what was wrong with the file at load, if anything (the file is then moved aside)
        self.problem: str | None = None

    @classmethod
    def in_data_dir(cls, data_dir: Path, **kw: Any) -> "OrderInfoTable":
        return cls(Path(data_dir) / "config" / FILE_NAME, **kw)

    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        return self._table.get((topic, group), {}).get(queue_id)

    # ------------------------------------------------------------------ the four operations

    def check_block(self, topic: str, group: str, queue_id: int, attempt_id: str | None,
                    invisible_time: int, now: int | None = None) -> bool:
        """Whether a pop of the queue must skip it: some offset of its last batch is un-acked and still
        invisible, and the request is not a retry of the one that popped it (same attempt id)."""
        info = self.get(topic, group, queue_id)
        if info is None:
            return False
        if info.invisible_time <= 0:  # an entry from a file without one: the request's own applies
            info.invisible_time = invisible_time
        return info.blocks(attempt_id, self._clock() if now is None else now)

    def update(self, topic: str, group: str, queue_id: int, *, attempt_id: str | None, pop_time: int,
               invisible_time: int, offsets: Sequence[int], now: int | None = None) -> dict[OrderCountKey, int]:
        """Record a batch just popped; returns its orderCountInfo entries (protocol.pop's encoder takes them).

        An offset popped again by a new attempt counts one more delivery than before; the same attempt
        repeated keeps the counts it had. Per offset with a count > 0: ``(flag, queue, offset) -> count``;
        and, for older clients, ``(flag, queue, None) -> the batch's smallest count``.
        """
        if not offsets:
            raise ValueError("an orderly pop records at least one offset")
        batch = tuple(sorted(offsets))
        queues = self._table.setdefault((topic, group), {})
        old = queues.get(queue_id)
        info = OrderInfo(pop_time, invisible_time, batch, attempt_id,
                         last_touched=self._clock() if now is None else now)
        if old is not None and old.attempt_id is not None and old.attempt_id == attempt_id:
            info.consumed = dict(old.consumed)
        elif old is not None:
            before = set(old.offsets)
            info.consumed = {o: old.consumed.get(o, 0) + 1 for o in batch if o in before}
        queues[queue_id] = info
        self._dirty = True
        flag = retry_flag_of(topic)
        counts: dict[OrderCountKey, int] = {(flag, queue_id, o): n for o, n in sorted(info.consumed.items())}
        least = min(info.consumed.values()) if len(info.consumed) == len(batch) else 0
        counts[(flag, queue_id, None)] = least
        return counts

    def commit_and_next(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int,
                        now: int | None = None) -> Commit:
        """An ACK of ``offset`` from the pop at ``pop_time``: which consumer offset to commit, if any."""
        info = self.get(topic, group, queue_id)
        if info is None:  # nothing recorded (e.g. lost with a crash): the ACK moves the queue past its message
            return Commit(CommitStatus.COMMIT, offset + 1)
        if not info.offsets or offset not in info.offsets:
            return Commit(CommitStatus.ILLEGAL)
        if pop_time != info.pop_time:
            return Commit(CommitStatus.STALE)
        info.acked.add(offset)
        info.last_touched = self._clock() if now is None else now
        self._dirty = True
        return Commit(CommitStatus.COMMIT, info.next_offset())

    def update_next_visible_time(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int,
                                 next_visible_ms: int, now: int | None = None) -> bool:
        """A change-invisible-time of one popped message; False (nothing changed) when the queue's batch is
        not the one ``pop_time`` names or does not hold ``offset``."""
        info = self.get(topic, group, queue_id)
        if info is None or pop_time != info.pop_time or offset not in info.offsets:
            return False
        info.next_visible[offset] = next_visible_ms
        info.last_touched = self._clock() if now is None else now
        self._dirty = True
        return True

    def clear_block(self, topic: str, group: str, queue_id: int) -> None:
        """Forget the queue's batch (an offset reset): the next pop is not blocked."""
        if self._table.get((topic, group), {}).pop(queue_id, None) is not None:
            self._dirty = True

    def unblock_at(self, topic: str, group: str, queue_id: int, now: int | None = None) -> int | None:
        """When the queue stops being blocked unless acks come first (for waking held pops); None: not
        blocked now."""
        info = self.get(topic, group, queue_id)
        at = self._clock() if now is None else now
        if info is None or not info.blocks(None, at):
            return None
        return max(info.visible_at(o) for o in info.outstanding())

    # ------------------------------------------------------------------ housekeeping and persistence

    def clean(self, queue_exists: Callable[[str, str, int], bool], now: int | None = None) -> int:
        """Drop entries idle for :data:`IDLE_EXPIRY_MS` or whose (topic, group, queue) is gone; returns how
        many were dropped."""
        at = self._clock() if now is None else now
        dropped = 0
        for key in list(self._table):
            queues = self._table[key]
            for qid in list(queues):
                if at - queues[qid].last_touched > IDLE_EXPIRY_MS or not queue_exists(key[0], key[1], qid):
                    del queues[qid]
                    dropped += 1
            if not queues:
                del self._table[key]
        if dropped:
            self._dirty = True
        return dropped

    def to_json(self) -> dict[str, Any]:
        return {"table": {f"{t}@{g}": {str(q): info.to_json() for q, info in sorted(queues.items())}
                          for (t, g), queues in sorted(self._table.items())}}

    @staticmethod
    def _parse(data: Any) -> dict[Key, dict[int, OrderInfo]]:
        out: dict[Key, dict[int, OrderInfo]] = {}
        for key, queues in (data.get("table") or {}).items():
            topic, sep, group = str(key).rpartition("@")
            if not sep:
                raise ValueError(f"order info key {key!r} is not topic@group")
            out[(topic, group)] = {int(q): OrderInfo.from_json(v) for q, v in queues.items()}
        return out

    def load(self) -> None:
        if self._file is None:
            return
        loaded = self._file.load(self._parse)
        self._table = loaded.data or {}
        self.problem = loaded.problem
        self._dirty = False

    def flush(self, *, force: bool = False) -> bool:
        """Save if anything changed since the last save (raises OSError, the table then stays dirty)."""
        if self._file is None or not (self._dirty or force):
            return False
        self._file.save(self.to_json())
        self._dirty = False
        return True

    def keys(self) -> Iterable[tuple[str, str, int]]:
        return [(t, g, q) for (t, g), queues in self._table.items() for q in queues]
