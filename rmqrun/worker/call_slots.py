"""The handler calls a worker has in flight at once, one slot each, as the supervisor must see them.

The ``threads`` and ``asyncio`` worker classes run up to ``worker_concurrency``
calls of a batch at once, and those calls end in any order. The supervisor
learns of a worker's progress only from the shared block
(:mod:`rmqrun.pipe.progress`), and must still know, if the worker dies, which
messages have a result (never run again), which calls were in flight (the
suspects: each is re-run alone to find the one that kills) and, while it
lives, since when its oldest call has run (the long-call watch, the
consume-timeout sweep). So each call takes a slot when it begins and frees it
when it ends, its messages' statuses are written the moment it ends (past the
prefix too: ``spread`` says they are meaningful), and the head is kept to the
oldest call in flight and the end of the furthest.

Everything here runs in the worker's main thread (the threads class's calls
only return values to it), so the block has one writer, as before.
"""

from __future__ import annotations

import struct
from typing import Sequence

from rmqrun.pipe import progress as progress_mem

__all__ = ["CallSlots", "NoFreeSlot"]

_STATE = struct.Struct("=diiii")  # began, done, call start, call end, in call (the head after the batch id)
_FIELDS = struct.Struct("=iiii")  # done, call start, call end, in call: "began" is never cleared (see progress)
_SPREAD = struct.Struct("=i")


class NoFreeSlot(progress_mem.RmqrunError):
    """A call was begun with every slot taken: the caller's own bound is broken (a bug, never input)."""


class CallSlots:
    """The calls in flight of the batch running now: ``take`` as one begins, ``finish`` as it ends."""

    __slots__ = ("size", "writer", "free", "calls", "final", "done", "n")

    def __init__(self, size: int, writer: progress_mem.Writer | None) -> None:
        if not 1 <= size <= progress_mem.MAX_CALLS:
            raise ValueError(f"between 1 and {progress_mem.MAX_CALLS} calls at once, not {size}")
        self.size = size
        self.writer = writer
        #: free slot numbers, the lowest taken first (the block's slots in use stay at its front)
        self.free = list(range(size - 1, -1, -1))
        #: slot -> (start, end, began) of the call in it
        self.calls: dict[int, tuple[int, int, float]] = {}
        #: which messages of the batch have a final status (for the prefix)
        self.final = bytearray()
        self.done = 0
        self.n = 0

    @property
    def in_flight(self) -> int:
        return len(self.calls)

    def begin_batch(self, n: int) -> None:
        """A batch of ``n`` messages starts (after ``Writer.begin``): none has a result, no call is in flight."""
        if self.calls:
            raise NoFreeSlot(f"{len(self.calls)} call(s) still in flight as a new batch begins")
        self.final = bytearray(n)
        self.done = 0
        self.n = n
        w = self.writer
        if w is not None:
            upto = min(n, progress_mem.CAPACITY)
            w.mm[w.at.status_at:w.at.status_at + upto] = bytes([progress_mem.NOT_RUN]) * upto
            _SPREAD.pack_into(w.mm, w.at.spread_at, upto)

    def take(self, start: int, end: int, began: float) -> int:
        """A call on messages [start, end) begins at ``began``: its slot (raises CallCut if the supervisor
        took these messages back, before anything is announced)."""
        w = self.writer
        if w is not None and w.mm[progress_mem.CUT_FLAG_AT]:
            batch_id, index = struct.unpack_from("=qi", w.mm, progress_mem.CUT_AT)
            if batch_id == w.batch_id and start >= index:
                raise progress_mem.CallCut(index)
        if not self.free:
            raise NoFreeSlot(f"no free call slot of {self.size}")
        slot = self.free.pop()
        self.calls[slot] = (start, end, began)
        if w is not None:
            progress_mem.CALL.pack_into(w.mm, w.at.calls_at + slot * progress_mem.CALL.size, start, end, began)
            self._head()
        return slot

    def finish(self, slot: int, statuses: Sequence[int], delays: Sequence[int]) -> None:
        """The call in ``slot`` ended, or will not be waited for (timed out, cancelled): its messages' statuses,
        already in ``statuses``, are final; the slot is free."""
        start, end, _ = self.calls.pop(slot)
        self.free.append(slot)
        self.free.sort(reverse=True)
        self._final(start, end, statuses, delays)
        if self.writer is not None:
            progress_mem.CALL.pack_into(self.writer.mm, self.writer.at.calls_at + slot * progress_mem.CALL.size,
                                        -1, 0, 0.0)
            self._head()

    def settle(self, start: int, end: int, statuses: Sequence[int], delays: Sequence[int]) -> None:
        """Messages [start, end) have a status without a call (a record that does not decode)."""
        self._final(start, end, statuses, delays)
        if self.writer is not None:
            self._head()

    def _final(self, start: int, end: int, statuses: Sequence[int], delays: Sequence[int]) -> None:
        final = self.final
        w = self.writer
        for i in range(start, min(end, self.n)):
            final[i] = 1
            if w is not None and i < progress_mem.CAPACITY:
                # the delay first: a status not NOT_RUN is what makes the pair meaningful to a reader
                d = delays[i]
                w.mm[w.at.delay_at + i] = (d if d >= 0 else d + 256) if -128 <= d <= 127 else 0
                w.mm[w.at.status_at + i] = statuses[i]
        done = self.done
        while done < self.n and final[done]:
            done += 1
        self.done = done
        if w is not None:
            w.done = min(done, progress_mem.CAPACITY)

    def end_batch(self) -> None:
        """The batch is answered: no call in flight, nothing spread (``Writer.publish`` writes the rest)."""
        w = self.writer
        for slot in list(self.calls):
            self.calls.pop(slot)
            self.free.append(slot)
            if w is not None:
                progress_mem.CALL.pack_into(w.mm, w.at.calls_at + slot * progress_mem.CALL.size, -1, 0, 0.0)
        self.free.sort(reverse=True)
        if w is not None:
            _SPREAD.pack_into(w.mm, w.at.spread_at, 0)

    def _head(self) -> None:
        """The head: the oldest call in flight (its start, when it began), the furthest end, and ``in call``."""
        w = self.writer
        assert w is not None
        calls = self.calls.values()
        if calls:
            start, _, began = min(calls, key=lambda c: c[2])
            end = max(c[1] for c in calls)
            _STATE.pack_into(w.mm, w.at.head_at + 8, began, w.done, start, end, 1)
        else:
            _FIELDS.pack_into(w.mm, w.at.head_at + 16, w.done, 0, 0, 0)
