"""The units a :class:`~rmqrun.consumer.process_queue.ProcessQueue` caches: one pull's records as a run, or
single messages, and the offset index that orders the single ones.

A concurrent queue's messages arrive a pull at a time and, in the common case, leave a pull at a time: the
job made of one pull succeeds in full. Caching such a pull as one :class:`QueuedRun` (its offsets, body sizes
and record views as three lists, a summed size) makes caching and forgetting it one step each, instead of an
object, a dict entry and a deque entry per message. A run is split into :class:`QueuedMessage` entries (in
the per-message :class:`OffsetIndex`) only when something needs one of its messages on its own: a job's
partial result (failures, NOT_RUN), the consume-timeout sweep, an orderly or key-ordered service.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass
from itertools import repeat
from typing import Any


@dataclass(slots=True)
class QueuedMessage:
    """One cached message: its queue offset, body size and whatever the caller attached.

    ``consume_start_ms`` is 0 until :meth:`ProcessQueue.mark_consume_started`
    (Java stamps the CONSUME_START_TIME property when a consume request runs);
    :meth:`ProcessQueue.clean_expired` only considers stamped messages.
    """

    offset: int
    size: int
    payload: Any = None
    consume_start_ms: int = 0


class QueuedRun:
    """One pull's records, cached and consumed as a unit (offsets strictly ascending).

    ``intact`` while the process queue holds all of them as this run; it turns False when the run is
    forgotten whole (:meth:`ProcessQueue.remove_run`), dropped with the queue (:meth:`ProcessQueue.clear`)
    or split into entries (:meth:`ProcessQueue.split_run`), which it then keeps in ``split``, in the run's
    order, so every later look at one of its messages sees the same entry.
    """

    __slots__ = ("offsets", "sizes", "payloads", "stamps", "size", "consume_start_ms", "intact", "split")

    def __init__(self, offsets: list[int], sizes: list[int], payloads: list[Any],
                 stamps: list[int] | None = None) -> None:
        if not (len(offsets) == len(sizes) == len(payloads)) or (stamps is not None and len(stamps) != len(offsets)):
            raise ValueError(f"a run needs one size and one payload per offset: {len(offsets)} offsets, "
                             f"{len(sizes)} sizes, {len(payloads)} payloads"
                             + ("" if stamps is None else f", {len(stamps)} store times"))
        self.offsets = offsets
        self.sizes = sizes
        self.payloads = payloads
        #: the records' store times (epoch ms, 0 or less: none), read with the pull for the statistics so no
        #: record is read again when its job is done; None: read from the payloads then
        self.stamps = stamps
        #: the body sizes summed (what ``pullThresholdSizeForQueue`` counts)
        self.size = sum(sizes)
        #: when its job was handed over, for the sweep without handler-call times (0: not yet)
        self.consume_start_ms = 0
        self.intact = False
        self.split: list[QueuedMessage] | None = None

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def first(self) -> int:
        return self.offsets[0]

    @property
    def last(self) -> int:
        return self.offsets[-1]

    def holds(self, offset: int) -> bool:
        """Whether ``offset`` is one of the run's (a bisect: the offsets ascend)."""
        offsets = self.offsets
        i = bisect.bisect_left(offsets, offset)
        return i < len(offsets) and offsets[i] == offset

    def entries(self) -> list[QueuedMessage]:
        """The run as fresh per-message entries (for a service that caches message by message)."""
        return list(map(QueuedMessage, self.offsets, self.sizes, self.payloads, repeat(self.consume_start_ms)))

    def __repr__(self) -> str:
        span = f"{self.offsets[0]}..{self.offsets[-1]}" if self.offsets else "empty"
        return f"QueuedRun({span}, n={len(self.offsets)}, size={self.size}, intact={self.intact})"


class OffsetIndex:
    """Offset-keyed map of single entries with amortised O(1) min / max.

    A dict ``offset -> QueuedMessage`` plus a deque of offsets in ascending order whose entries are deleted
    *lazily*: a removed offset stays in the deque until it reaches either end, where :meth:`first_key` /
    :meth:`last_key` pop it (see the ProcessQueue module docstring for the costs).
    """

    __slots__ = ("entries", "_order")

    def __init__(self) -> None:
        self.entries: dict[int, QueuedMessage] = {}
        # Ascending (non-strictly: a removed offset put again may appear twice);
        # holds every live offset plus removed ones not yet purged from the ends.
        self._order: deque[int] = deque()

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, entry: QueuedMessage) -> bool:
        offset = entry.offset
        if offset in self.entries:
            return False
        self.entries[offset] = entry
        order = self._order
        if not order or offset >= order[-1]:
            order.append(offset)
        elif offset <= order[0]:
            order.appendleft(offset)
        else:
            order.insert(bisect.bisect_left(order, offset), offset)
        return True

    def remove(self, offset: int) -> QueuedMessage | None:
        entry = self.entries.pop(offset, None)
        if entry is not None and not self.entries:
            self._order.clear()
        return entry

    def first_key(self) -> int | None:
        entries = self.entries
        if not entries:
            return None
        order = self._order
        while order[0] not in entries:
            order.popleft()
        return order[0]

    def last_key(self) -> int | None:
        entries = self.entries
        if not entries:
            return None
        order = self._order
        while order[-1] not in entries:
            order.pop()
        return order[-1]

    def pop_first(self) -> QueuedMessage | None:
        key = self.first_key()
        if key is None:
            return None
        self._order.popleft()
        return self.remove(key)

    def head(self, limit: int) -> list[QueuedMessage]:
        """Up to ``limit`` live entries in ascending offset order."""
        out: list[QueuedMessage] = []
        last = None
        for offset in self._order:
            if len(out) >= limit:
                break
            entry = self.entries.get(offset)
            if entry is not None and offset != last:
                out.append(entry)
                last = offset
        return out

    def rebuild_order(self) -> None:
        """Re-sort the order deque from the live entries (after many inserts out of order)."""
        self._order = deque(sorted(self.entries))

    def clear(self) -> None:
        self.entries.clear()
        self._order.clear()
