"""ProcessQueue: the in-flight messages of one message queue and the offset to commit.

Messages of a queue are handed to workers in parallel and finish in any order,
but a consumer may only commit an offset below which *everything* is done. Java's
rule (``ProcessQueue.removeMessage``), copied here: after removing finished
messages, commit the smallest offset still cached, or ``queue_offset_max + 1``
when nothing is left. The offset store applies it increase-only, so a stale or
reordered result can never move the committed offset backwards. Orderly queues
use the take / commit / rollback half instead (``takeMessages`` & co).

No I/O and no clock of its own: every time-dependent method takes ``now_ms``
(defaulting to the wall clock), so tests and the supervisor's loop decide time.

Data structure
--------------
Two tiers. A concurrent service caches each pull as one :class:`QueuedRun` (offsets, sizes and record
views as lists): caching it, and forgetting it when its job succeeded in full, are O(1), with nothing per
message. The runs sit in a deque in ascending offset order (a pull is always above everything cached),
deleted lazily like the offsets below. Single messages (an orderly or key-ordered service, a decoded
message, and the messages of a run that had to be split: a partial result, the sweep) live in an
:class:`OffsetIndex`: a dict ``offset -> QueuedMessage`` (O(1) insert, lookup, removal of any offset) plus a
deque of offsets in ascending order whose entries are deleted *lazily*: a removed offset stays in the deque
until it reaches either end, where ``first_key`` / ``last_key`` pop it. Every offset is pushed and popped
once, so insert, remove, min and max are amortised O(1): cheaper than a balanced tree or a heap (O(log n)),
with no third-party dependency. The deque's stale entries are bounded by the offset span of the cache,
which flow control bounds already (``consumeConcurrentlyMaxSpan``), and the deque is reset whenever the
cache empties. An out-of-order insert (an orderly rollback puts offsets back at the front: O(1)
``appendleft``; anything else) falls back to a bisect insert, O(n).

Every cached message is in exactly one place: an intact run, the index, or (orderly) the taken set. The
smallest cached offset, which the commit rule needs, is the smaller of the first intact run's first offset
and the index's first key; the counts and the size add the intact runs' to the index's, so flow control
and the status counts are exact in both tiers.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from itertools import islice, repeat
from operator import attrgetter
from typing import Any

from rmqrun.consumer.defaults import (
    CLEAN_EXPIRED_MAX_PER_PASS,
    PULL_MAX_IDLE_TIME_MS,
    REBALANCE_LOCK_MAX_LIVE_TIME_MS,
    UNLOCK_DELAY_TIME_MS,
)
from rmqrun.consumer.queue_runs import RunTier
from rmqrun.consumer.queued import OffsetIndex, QueuedMessage, QueuedRun
from rmqrun.model import Message, MessageQueue

__all__ = ["ProcessQueue", "QueuedMessage", "QueuedRun"]

PROPERTY_MAX_OFFSET = "MAX_OFFSET"


def _now(now_ms: int | None) -> int:
    return int(time.time() * 1000) if now_ms is None else now_ms


_OFFSET = attrgetter("offset")
_SIZE = attrgetter("size")


class ProcessQueue(RunTier):
    """Per-queue cache of pulled messages not yet finished, mirroring Java's ProcessQueue.

    Counters follow Java: ``msg_count`` is every cached message including those
    an orderly consumer has taken but not committed; ``msg_size`` sums body
    sizes only (for ``pullThresholdSizeForQueue``). Unlike Java, both are exact
    by construction (Java's atomics can drift on odd call sequences).
    """

    __slots__ = (
        "mq", "_tree", "_runs", "_run_count", "_consuming_msgs", "_taken_runs", "_taken_run_count", "msg_size", "queue_offset_max", "pulled_to",
        "msg_acc_cnt",
        "dropped", "locked", "lock_lapsed", "consuming", "try_unlock_times", "last_pull_timestamp",
        "last_consume_timestamp", "last_lock_timestamp", "lock_max_live_ms", "pull_max_idle_ms", "room",
    )

    def __init__(
        self,
        mq: MessageQueue | None = None,
        *,
        now_ms: int | None = None,
        lock_max_live_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME_MS,
        pull_max_idle_ms: int = PULL_MAX_IDLE_TIME_MS,
    ) -> None:
        now = _now(now_ms)
        self.mq = mq
        self._tree = OffsetIndex()
        # Concurrent: whole pulls, ascending; runs no longer intact are purged lazily from the ends.
        self._runs: deque[QueuedRun] = deque()
        self._run_count = 0
        """Messages in intact runs."""
        # Orderly only: taken by take_messages, awaiting commit() or rollback().
        self._consuming_msgs: dict[int, QueuedMessage] = {}
        # Orderly only: pulls taken whole by take_run (ascending, above the taken entries' offsets or
        # below them: each is one job's), awaiting commit; split into _consuming_msgs for anything else.
        self._taken_runs: deque[QueuedRun] = deque()
        self._taken_run_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0
        self.pulled_to = -1
        """The next-begin offset of the last pull handled (-1: none): see :meth:`note_pulled_to`."""
        self.msg_acc_cnt = 0
        """Messages still on the broker behind this batch (MAX_OFFSET - last offset)."""
        self.dropped = False
        self.locked = False
        self.lock_lapsed = False
        """Orderly: the broker lock was granted again after a gap (see :meth:`note_locked`); what is
        cached and the next offset may be behind another owner's commit until the queue restarts."""
        self.consuming = False
        """Java's ``consuming`` flag: a consume request is scheduled for this queue."""
        self.try_unlock_times = 0
        self.last_pull_timestamp = now
        self.last_consume_timestamp = now
        self.last_lock_timestamp = now
        self.lock_max_live_ms = lock_max_live_ms
        self.pull_max_idle_ms = pull_max_idle_ms
        self.room: Any = None
        """The future a puller held by flow control waits on (an ``asyncio.Future``; None: no puller waits):
        :meth:`made_room` resolves it as soon as messages leave the cache (rmqrun/consumer/puller.py)."""

    def made_room(self) -> None:
        """Messages left the cache: a puller held by flow control looks again now, not at its next poll.

        Java's puller polls every 50 ms while a queue is over its limits; with the handlers slow
        enough to hold every queue there (1 ms of CPU each), those polls were about half of the
        supervisor's loop wake-ups. Called wherever the cache shrinks."""
        waiter = self.room
        if waiter is not None:
            self.room = None
            if not waiter.done():
                waiter.set_result(None)

    # --- filling -------------------------------------------------------------------
    def put(self, entries: Iterable[QueuedMessage], max_offset: int | None = None) -> bool:
        """Cache a pulled batch; True when the caller should schedule consumption.

        Like Java's ``putMessage`` the answer is True only on the transition to
        "a consume request is needed" (the :attr:`consuming` flag), which is what
        an orderly consumer keys on; a concurrent consumer dispatches every batch
        and may ignore it. ``max_offset`` is the broker's max offset of the queue
        from the pull response; it sets :attr:`msg_acc_cnt`. An offset already
        cached is ignored.
        """
        tree = self._tree
        taken = self._consuming_msgs
        size = self.msg_size
        top = self.queue_offset_max
        last: QueuedMessage | None = None
        cached = tree.entries
        order = tree._order
        if isinstance(entries, list) and entries:
            # A pulled batch: a run of ascending offsets above everything ever put (cached or
            # taken: queue_offset_max bounds both, and every offset in the order deque). Added
            # as a run (C-level dict/deque/sum calls), not message by message.
            offsets = list(map(_OFFSET, entries))
            if ((offsets[0] > top or (not cached and not taken and not self._taken_runs and not self._run_count))
                    and offsets == sorted(offsets) and len(set(offsets)) == len(offsets)):
                cached.update(zip(offsets, entries))
                order.extend(offsets)
                self.msg_size = size + sum(map(_SIZE, entries))
                self.queue_offset_max = max(top, offsets[-1])
                return self._after_put(offsets[-1], max_offset)
        if self._run_count:
            self._split_all()  # so that an offset already cached in a run is seen as cached
        if self._taken_runs:
            self._split_taken()  # so that an offset taken in a run is seen as taken
        add = tree.add
        for entry in entries:
            last = entry
            if taken and entry.offset in taken:
                continue
            if add(entry):
                size += entry.size
                if entry.offset > top:
                    top = entry.offset
        self.msg_size = size
        # Java assigns the last new offset; the max is the same for an ascending
        # batch and cannot go backwards on a strange one.
        self.queue_offset_max = top
        return self._after_put(None if last is None else last.offset, max_offset)

    def _after_put(self, last: int | None, max_offset: int | None) -> bool:
        dispatch = False
        if (len(self._tree) or self._run_count) and not self.consuming:
            self.consuming = True
            dispatch = True
        if last is not None and max_offset is not None:
            backlog = max_offset - last
            if backlog > 0:
                self.msg_acc_cnt = backlog
        return dispatch

    def note_pulled_to(self, next_offset: int) -> None:
        """The queue has been pulled up to ``next_offset`` (a pull's next-begin offset), once its
        messages, if any, were :meth:`put`.

        Records below it that are not cached were filtered out by tag (by the broker, or by the
        client's re-filter): nothing is left to do for them. So when the cache drains, the offset
        to commit is this one, not ``queue_offset_max + 1``, which would leave a lag of one on a
        queue whose last records did not match until the next long poll returns (Java's quirk),
        and for good after a stop.
        """
        self.pulled_to = next_offset

    def _drained_to(self) -> int:
        """The offset to commit when nothing is cached or taken: everything pulled is done."""
        top = self.queue_offset_max + 1
        return top if self.pulled_to < top else self.pulled_to

    def put_messages(self, msgs: Sequence[Message]) -> bool:
        """:meth:`put` for decoded messages; the payload is the message itself.

        The backlog comes from the last message's MAX_OFFSET property, which the
        pull path stamps on every message (Java's processPullResult).
        """
        max_offset: int | None = None
        if msgs:
            prop = msgs[-1].properties.get(PROPERTY_MAX_OFFSET)
            if prop is not None:
                max_offset = int(prop)
        return self.put((QueuedMessage(m.queue_offset, len(m.body), m) for m in msgs), max_offset)

    # --- concurrent consumption ------------------------------------------------------
    def remove_messages(self, offsets: Iterable[int], now_ms: int | None = None) -> int:
        """Forget finished messages and return the offset to commit (Java ``removeMessage``).

        The result is the smallest offset still cached, or ``queue_offset_max + 1``
        when the cache is now empty (or the last pull's next-begin offset, if
        :meth:`note_pulled_to` said it is higher: the records between were filtered
        out by tag), or -1 when the cache was already empty before the call
        (nothing to say; the caller must not commit). Offsets not cached are
        ignored. Apply the result with ``increase_only=True``.
        """
        self.last_consume_timestamp = _now(now_ms)
        tree = self._tree
        cached = tree.entries
        if self._run_count:
            offsets = list(offsets)
            self._split_runs_holding(offsets)
        elif not cached:
            return -1
        # one C-level pass: dict.pop(offset, None) for each, the misses filtered out
        removed = list(filter(None, map(cached.pop, offsets, repeat(None))))
        self.msg_size -= sum(map(_SIZE, removed))
        if not cached:
            tree._order.clear()
        if self.room is not None:
            self.made_room()
        return self._offset_to_commit()

    def _offset_to_commit(self) -> int:
        """After a removal: the smallest offset still cached, else how far everything is done."""
        first = self.first_offset()
        if first is not None:
            return first
        if self._consuming_msgs or self._taken_runs:
            return self.queue_offset_max + 1
        return self._drained_to()

    def mark_consume_started(self, offsets: Iterable[int], now_ms: int | None = None) -> None:
        """Stamp dispatch time on cached messages, for :meth:`clean_expired`."""
        now = _now(now_ms)
        entries = self._tree.entries
        if self._run_count:
            offsets = list(offsets)
            self._split_runs_holding(offsets)
        for offset in offsets:
            entry = entries.get(offset)
            if entry is not None:
                entry.consume_start_ms = now

    def clean_expired(self, consume_timeout_ms: int, now_ms: int | None = None,
                      started_ms: Mapping[int, int | None] | None = None) -> list[QueuedMessage]:
        """Head messages stuck in a consumer longer than ``consume_timeout_ms``.

        Java's ``cleanExpiredMsg`` walks at most 16 messages from the head and
        stops at the first one not expired (or never started). It sends each
        back to the broker with delay level 3, then removes it; here the caller
        does both (send back, then :meth:`remove_messages`), so a failed send
        leaves the message cached. Orderly consumers must not call this (Java
        skips orderly queues).

        ``started_ms``, when the executor can tell, maps an offset to the time
        (ms) its handler call began, or to None when that call has ended and its
        result waits for the rest of its batch: such a message is passed over, as
        Java would have removed it already. An offset missing from it has not
        started. Without it, the stamps of :meth:`mark_consume_started` count.
        """
        now = _now(now_ms)
        expired: list[QueuedMessage] = []
        if self._run_count:
            self._split_all()  # a rare walk (once per consumeTimeout): the head message by message
        for entry in self._tree.head(CLEAN_EXPIRED_MAX_PER_PASS):
            if started_ms is None:
                began: int | None = entry.consume_start_ms
            elif entry.offset not in started_ms:
                break  # waiting for its call: never swept
            else:
                began = started_ms[entry.offset]
                if began is None:
                    continue  # its call is over; the result comes with its batch
            if began and now - began > consume_timeout_ms:
                expired.append(entry)
            else:
                break
        return expired

    # --- orderly consumption ------------------------------------------------------------
    def take_messages(self, batch_size: int, now_ms: int | None = None) -> list[QueuedMessage]:
        """Move up to ``batch_size`` head messages to the consuming set, in offset order.

        An empty result clears :attr:`consuming`, so the next :meth:`put` asks
        for a new consume request (Java ``takeMessages``).
        """
        self.last_consume_timestamp = _now(now_ms)
        if self._run_count:
            self._split_all()
        tree = self._tree
        taken = self._consuming_msgs
        cached = tree.entries
        order = tree._order
        result: list[QueuedMessage] = []
        n = min(batch_size, len(cached))
        head = list(islice(order, n)) if n > 0 else []
        if head and len(set(head)) == n and all(map(cached.__contains__, head)):
            # the deque's first n offsets are n distinct live ones, so they are the n smallest:
            # taken as a run, in C-level calls
            result = list(map(cached.pop, head))
            taken.update(zip(head, result))
            if n == len(order):
                order.clear()
            else:
                for _ in range(n):
                    order.popleft()
        # otherwise _OffsetIndex.pop_first inlined: the deque's head, skipping offsets no longer cached
        while cached and len(result) < batch_size:
            offset = order.popleft()
            entry = cached.pop(offset, None)
            if entry is not None:
                taken[offset] = entry
                result.append(entry)
        if not cached:
            order.clear()
        if not result:
            self.consuming = False
        return result

    def commit(self) -> int:
        """Finish everything taken; return the next offset to consume, or -1 if nothing was taken.

        That is the highest taken offset + 1 (Java ``commit``), or, when nothing is
        cached either, the last pull's next-begin offset if higher (records after
        the last taken one were filtered out by tag; see :meth:`note_pulled_to`).
        Store it with ``increase_only=False``.
        """
        taken = self._consuming_msgs
        runs = self._taken_runs
        if taken:
            last = max(taken)
            self.msg_size -= sum(map(_SIZE, taken.values()))
            taken.clear()
        elif runs:
            last = -1
        else:
            return -1
        if runs:
            last = max(last, runs[-1].offsets[-1])
            self.msg_size -= sum(run.size for run in runs) if len(runs) > 1 else runs[0].size
            runs.clear()
            self._taken_run_count = 0
        self.made_room()
        if not self._tree.entries and not self._run_count and self.pulled_to > last + 1:
            return self.pulled_to
        return last + 1

    def commit_through(self, last: int) -> int:
        """Finish the taken messages up to offset ``last``; the rest stay taken (a job pipelined behind
        them). Returns the next offset to consume as :meth:`commit` does, or -1 if none was taken."""
        taken = self._consuming_msgs
        runs = self._taken_runs
        if (runs[-1].offsets[-1] <= last if runs else taken) and (not taken or max(taken) <= last):
            return self.commit()  # everything taken is through ``last`` (the usual case: one whole pull)
        top = self._taken_runs_through(last) if runs else -1  # splits a run across ``last`` into ``taken``
        done = [o for o in taken if o <= last]
        if not done and top < 0:
            return -1
        self.msg_size -= sum(map(_SIZE, map(taken.pop, done)))
        self.made_room()
        return max(top, max(done, default=-1)) + 1

    def rollback(self) -> None:
        """Put every taken message back at the head of the queue."""
        taken = self._consuming_msgs
        tree = self._tree
        if self._run_count:
            self._split_all()
        self._split_taken()
        for offset in sorted(taken, reverse=True):
            tree.add(taken[offset])
        taken.clear()

    def make_messages_to_consume_again(self, offsets: Iterable[int]) -> None:
        """Put these taken messages back so the next take returns them first.

        Java's orderly service always passes the whole taken batch (a suspend
        result). Offsets that are not currently taken are ignored, where Java
        would re-cache them without counting them.
        """
        taken = self._consuming_msgs
        tree = self._tree
        if self._run_count:
            self._split_all()
        self._split_taken()
        for offset in sorted(offsets, reverse=True):
            entry = taken.pop(offset, None)
            if entry is not None:
                tree.add(entry)

    def has_consuming(self) -> bool:
        """Whether messages are taken and not yet committed or rolled back."""
        return bool(self._consuming_msgs) or bool(self._taken_runs)

    # --- inspection -------------------------------------------------------------------
    @property
    def msg_count(self) -> int:
        return len(self._tree) + self._run_count + len(self._consuming_msgs) + self._taken_run_count

    @property
    def cached_count(self) -> int:
        """Messages cached and not taken."""
        return len(self._tree) + self._run_count

    def has_temp_messages(self) -> bool:
        """Java ``hasTempMessage``: messages cached and not taken."""
        return len(self._tree) + self._run_count > 0

    def max_span(self) -> int:
        """``last offset - first offset`` of the cache; 0 when empty (flow control)."""
        first = self.first_offset()
        if first is None:
            return 0
        last = self.last_offset()
        assert last is not None
        return last - first

    def first_offset(self) -> int | None:
        """The smallest offset cached and not taken (None: none)."""
        first = self._tree.first_key()
        if self._run_count:
            run = self._first_run()
            assert run is not None
            if first is None or run.offsets[0] < first:
                return run.offsets[0]
        return first

    def last_offset(self) -> int | None:
        """The largest offset cached and not taken (None: none)."""
        last = self._tree.last_key()
        if self._run_count:
            run = self._last_run()
            assert run is not None
            if last is None or run.offsets[-1] > last:
                return run.offsets[-1]
        return last

    def get(self, offset: int) -> QueuedMessage | None:
        """The cached message at ``offset``. One inside an intact run comes as a snapshot entry (a look, as
        the oldest-unfinished view takes); a change to it is not seen by the queue."""
        entry = self._tree.entries.get(offset)
        if entry is None and self._run_count:
            run = self._run_holding(offset)
            if run is not None:
                i = run.offsets.index(offset)
                return QueuedMessage(offset, run.sizes[i], run.payloads[i], run.consume_start_ms)
        return entry

    def get_taken(self, offset: int) -> QueuedMessage | None:
        """An orderly message taken and not yet committed (for the oldest-unfinished view)."""
        entry = self._consuming_msgs.get(offset)
        if entry is None:
            for run in self._taken_runs:  # a look at a run taken whole, as get() gives of a cached one
                if run.holds(offset):
                    i = run.offsets.index(offset)
                    return QueuedMessage(offset, run.sizes[i], run.payloads[i], run.consume_start_ms)
        return entry

    def __contains__(self, offset: object) -> bool:
        if offset in self._tree.entries:
            return True
        return bool(self._run_count) and isinstance(offset, int) and self._run_holding(offset) is not None

    def __len__(self) -> int:
        return self.msg_count

    def clear(self) -> None:
        """Drop every cached message and reset the counters (Java ``clear``)."""
        self._tree.clear()
        for run in self._runs:
            run.intact = False  # its job's result, if any comes, finds nothing to remove
        self._runs.clear()
        self._run_count = 0
        self._consuming_msgs.clear()
        self._taken_runs.clear()
        self._taken_run_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0
        self.pulled_to = -1
        self.made_room()

    # --- locks and liveness -------------------------------------------------------------
    def note_locked(self, now_ms: int | None = None) -> None:
        """The broker granted (or renewed) this queue's lock.

        If the lock was not held just before (lost at a renewal, or never
        confirmed after a broken connection) or had expired locally (no renewal
        for longer than the local expiry: a frozen process, a broker out of
        reach), another client may have owned the queue meanwhile and committed
        past what this one cached: :attr:`lock_lapsed` asks the consume service
        to restart the queue from the broker's offset before consuming on.
        """
        now = _now(now_ms)
        if not self.locked or now - self.last_lock_timestamp > self.lock_max_live_ms:
            self.lock_lapsed = True
        self.locked = True
        self.last_lock_timestamp = now

    def holds_lock(self, now_ms: int | None = None) -> bool:
        """Orderly: locked, fresh and continuous, so the offset in memory is this client's to commit.
        (:meth:`is_lock_expired` inlined: checked a few times per orderly job.)"""
        if not self.locked or self.lock_lapsed:
            return False
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return now - self.last_lock_timestamp <= self.lock_max_live_ms

    def is_lock_expired(self, now_ms: int | None = None) -> bool:
        """Orderly: the broker lock was last renewed more than 30 s ago; stop consuming."""
        return _now(now_ms) - self.last_lock_timestamp > self.lock_max_live_ms

    def is_pull_expired(self, now_ms: int | None = None) -> bool:
        """Not pulled for 120 s: the rebalance drops and recreates such a queue."""
        return _now(now_ms) - self.last_pull_timestamp > self.pull_max_idle_ms

    def inc_try_unlock_times(self) -> None:
        self.try_unlock_times += 1

    def unlock_delay_ms(self) -> int:
        """Orderly queue removed at rebalance: how long to wait before unlocking it.

        RebalancePushImpl.unlockDelay waits 20 s while messages are still cached,
        so that whoever gets the queue next does not overlap with our tail.
        """
        return UNLOCK_DELAY_TIME_MS if self.has_temp_messages() else 0

    def info(self, commit_offset: int = 0) -> dict[str, Any]:
        """ProcessQueueInfo as fastjson writes it (GET_CONSUMER_RUNNING_INFO's mqTable)."""
        first = self.first_offset()
        taken = list(self._consuming_msgs)
        for run in self._taken_runs:
            taken += (run.offsets[0], run.offsets[-1])  # its bounds: the count comes from the counter
        return {
            "cachedMsgCount": self.cached_count,
            "cachedMsgMaxOffset": self.last_offset() if first is not None else 0,
            "cachedMsgMinOffset": first if first is not None else 0,
            "cachedMsgSizeInMiB": self.msg_size // (1024 * 1024),
            "commitOffset": commit_offset,
            "droped": self.dropped,
            "lastConsumeTimestamp": self.last_consume_timestamp,
            "lastLockTimestamp": self.last_lock_timestamp,
            "lastPullTimestamp": self.last_pull_timestamp,
            "locked": self.locked,
            "transactionMsgCount": len(self._consuming_msgs) + self._taken_run_count,
            "transactionMsgMaxOffset": max(taken) if taken else 0,
            "transactionMsgMinOffset": min(taken) if taken else 0,
            "tryUnlockTimes": self.try_unlock_times,
        }

    def __repr__(self) -> str:
        return (
            f"ProcessQueue({self.mq}, cached={self.cached_count}, taken={len(self._consuming_msgs) + self._taken_run_count}, "
            f"span={self.max_span()}, max={self.queue_offset_max}, dropped={self.dropped}, "
            f"locked={self.locked})"
        )
