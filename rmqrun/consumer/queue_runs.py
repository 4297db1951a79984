"""The run tier of a :class:`~rmqrun.consumer.process_queue.ProcessQueue`: whole pulls cached as one unit.

See the ProcessQueue module docstring (*Data structure*) for why and for the invariant: every cached
message is in exactly one intact :class:`~rmqrun.consumer.queued.QueuedRun`, or in the per-message
:class:`~rmqrun.consumer.queued.OffsetIndex`, or taken (orderly). What works on runs lives here; what needs
single messages splits the runs it touches first (:meth:`RunTier.split_run`, :meth:`RunTier._split_all`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from itertools import islice
from operator import lt
from typing import TYPE_CHECKING

from rmqrun.consumer.queued import OffsetIndex, QueuedMessage, QueuedRun


class RunTier:
    """Mixin of :class:`ProcessQueue` (which owns the slots and the per-message half)."""

    __slots__ = ()
    _tree: OffsetIndex
    _runs: deque[QueuedRun]
    _run_count: int
    _consuming_msgs: dict[int, QueuedMessage]
    _taken_runs: deque[QueuedRun]
    _taken_run_count: int
    msg_size: int
    queue_offset_max: int
    last_consume_timestamp: int
    room: object

    if TYPE_CHECKING:  # ProcessQueue's own
        def made_room(self) -> None: ...

        def put(self, entries: Iterable[QueuedMessage], max_offset: int | None = None) -> bool: ...

        def remove_messages(self, offsets: Iterable[int], now_ms: int | None = None) -> int: ...

        def _after_put(self, last: int | None, max_offset: int | None) -> bool: ...

        def _offset_to_commit(self) -> int: ...

    def put_run(self, run: QueuedRun, max_offset: int | None = None) -> bool:
        """Cache a pulled batch as one unit (see the module docstring); answers as :meth:`put`.

        The run must ascend strictly and lie above everything cached or taken (a pull always does); a run
        that does not is cached message by message instead (:attr:`QueuedRun.intact` stays False and
        :meth:`remove_run` / :meth:`split_run` still find its messages).
        """
        offsets = run.offsets
        if not offsets:
            return self._after_put(None, max_offset)
        if run.intact or run.split is not None:
            return self._after_put(offsets[-1], max_offset)  # put before: nothing new
        top = self.queue_offset_max
        if (not (offsets[0] > top or not (self._tree.entries or self._consuming_msgs or self._taken_runs
                                          or self._run_count))
                or not all(map(lt, offsets, islice(offsets, 1, None)))):
            run.split = run.entries()
            return self.put(run.split, max_offset)
        run.intact = True
        self._runs.append(run)
        self._run_count += len(offsets)
        self.msg_size += run.size
        if offsets[-1] > top:
            self.queue_offset_max = offsets[-1]
        return self._after_put(offsets[-1], max_offset)

    def _first_run(self) -> QueuedRun | None:
        runs = self._runs
        while runs and not runs[0].intact:
            runs.popleft()
        return runs[0] if runs else None

    def _last_run(self) -> QueuedRun | None:
        runs = self._runs
        while runs and not runs[-1].intact:
            runs.pop()
        return runs[-1] if runs else None

    def _run_holding(self, offset: int) -> QueuedRun | None:
        for run in self._runs:
            if run.intact and run.offsets[0] <= offset <= run.offsets[-1] and run.holds(offset):
                return run
        return None

    def split_run(self, run: QueuedRun) -> list[QueuedMessage]:
        """The run's messages as entries, in its order, cached one by one from now on while the run was
        intact (a partial result settles message by message). The same entries on every call, including
        those already removed, so a job's verdicts line up with them by index."""
        if run.intact:
            run.intact = False
            entries = run.entries()
            run.split = entries
            self._run_count -= len(entries)
            tree = self._tree
            order = tree._order
            tree.entries.update(zip(run.offsets, entries))
            if not order or entries[0].offset > order[-1]:
                order.extend(run.offsets)
            else:  # below offsets the index holds (a later run split before it): one re-sort
                tree.rebuild_order()
            if not self._run_count:
                self._runs.clear()
        elif run.split is None:
            run.split = run.entries()  # removed whole, or dropped with the queue: nothing cached to split
        return run.split

    def _split_all(self) -> None:
        """Every intact run to entries (for a walk or a change message by message), in one re-sort."""
        runs = [r for r in self._runs if r.intact]
        self._runs.clear()
        self._run_count = 0
        if not runs:
            return
        tree = self._tree
        for run in runs:
            run.intact = False
            run.split = run.entries()
            tree.entries.update(zip(run.offsets, run.split))
        tree.rebuild_order()

    def _split_runs_holding(self, offsets: list[int]) -> None:
        if not offsets:
            return
        wanted = set(offsets)
        lo, hi = min(wanted), max(wanted)
        for run in [r for r in self._runs if r.intact and r.offsets[0] <= hi and r.offsets[-1] >= lo]:
            if not wanted.isdisjoint(run.offsets):
                self.split_run(run)

    def remove_run(self, run: QueuedRun, now_ms: int | None = None) -> int:
        """Forget a run whose job finished in full; returns the offset to commit as :meth:`remove_messages`.

        An intact run goes in one step; one that was split (or never cached whole) is removed message by
        message, those already gone ignored."""
        if not run.intact:
            return self.remove_messages(run.offsets, now_ms)
        self.last_consume_timestamp = int(time.time() * 1000) if now_ms is None else now_ms
        run.intact = False
        self._run_count -= len(run.offsets)
        self.msg_size -= run.size
        if not self._run_count:
            self._runs.clear()
        if self.room is not None:
            self.made_room()
        return self._offset_to_commit()

    def mark_run_started(self, run: QueuedRun, now_ms: int | None = None) -> None:
        """:meth:`mark_consume_started` for a run's messages (one stamp while it is intact)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        run.consume_start_ms = now
        if run.split is not None:
            for entry in run.split:
                entry.consume_start_ms = now


    # --- orderly: whole runs taken ---------------------------------------------------------
    def take_run(self, batch_size: int, now_ms: int | None = None) -> QueuedRun | None:
        """:meth:`take_messages` when what it would take is exactly the first cached run (nothing cached
        message by message, the run no longer than ``batch_size`` and as long as ``min(batch_size,
        cached)``): the run moves to the taken set whole, with nothing per message. None otherwise (the
        caller takes message by message; nothing changed).

        A taken run stays whole until it is committed (:meth:`commit`, :meth:`commit_through`); anything
        that needs its messages one by one (put back, rolled back, a result not in full) splits every taken
        run into the taken entries first (:meth:`_split_taken`), so the taken set is the same messages
        either way."""
        if self._tree.entries or not self._run_count:
            return None
        run = self._first_run()
        if run is None or len(run.offsets) != min(batch_size, self._run_count):
            return None
        self.last_consume_timestamp = int(time.time() * 1000) if now_ms is None else now_ms
        self._runs.popleft()
        run.intact = False
        self._run_count -= len(run.offsets)
        if not self._run_count:
            self._runs.clear()
        self._taken_runs.append(run)
        self._taken_run_count += len(run.offsets)
        return run

    def _split_taken(self) -> None:
        """Every run taken whole to taken entries (``run.split``), for a change message by message."""
        runs = self._taken_runs
        if not runs:
            return
        taken = self._consuming_msgs
        for run in runs:
            run.split = run.entries()
            taken.update(zip(run.offsets, run.split))
        runs.clear()
        self._taken_run_count = 0

    def taken_entries(self, run: QueuedRun) -> list[QueuedMessage]:
        """The messages of a run taken by :meth:`take_run` as entries, the very ones the taken set (or, once
        put back, the cache) holds from now on, so a result settles and changes (reconsume counts) what
        the queue hands out next. A run no longer taken (committed, or dropped with the queue) gets
        entries of its own."""
        if run.split is None:
            if any(r is run for r in self._taken_runs):
                self._split_taken()
            else:
                run.split = run.entries()
        assert run.split is not None
        return run.split

    def _taken_runs_through(self, last: int) -> int:
        """:meth:`commit_through`'s part for the runs taken whole (ascending): forget those ending at or
        below ``last``; returns the highest offset forgotten (-1: none). A run with offsets on both sides
        of ``last`` is split first (the caller then finds its messages among the taken entries)."""
        runs = self._taken_runs
        if any(r.offsets[0] <= last < r.offsets[-1] for r in runs):
            self._split_taken()
            return -1
        done = -1
        while runs and runs[0].offsets[-1] <= last:
            run = runs.popleft()
            self._taken_run_count -= len(run.offsets)
            self.msg_size -= run.size
            done = run.offsets[-1]
        return done
