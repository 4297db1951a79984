"""What a POP consumer holds per assignment: the popped messages not yet acknowledged.

Java's ``PopProcessQueue`` is only a counter (``waitAckCount``). Here each
popped message is a :class:`PopEntry` holding its current receipt, because a
receipt changes: extending a long call's invisibility (CHANGE_MESSAGE_INVISIBLETIME)
returns a new one, and only the newest acknowledges the message. An entry is
*settled* once its outcome is decided (acked, delayed, dead-lettered, or left to
come back); from then on nothing extends it. An ack waits for an extension
already on the wire, so it always names the receipt the broker holds.

No I/O here; the clock is passed in (``now_ms``) so tests decide time.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Iterable

from rmqrun.client.pop_message import UNREAD, PoppedMessage, PopRun
from rmqrun.consumer.executor import ConsumeJob, JobResult
from rmqrun.model import MessageQueue
from rmqrun.protocol.pop import ReceiptHandle


#: a PopEntry's lapse time / queue offset, read over a whole job in C (``map``, ``min``, ``sort``)
VISIBLE_AT = attrgetter("visible_at")
OFFSET = attrgetter("queue_offset")
#: a PopEntry's place in a job: (queue id, queue offset) as one int, compared in C
ORDER = attrgetter("order")
#: a PopEntry's newest receipt (built from its run unless it has one of its own)
RECEIPT = attrgetter("receipt")
#: a PopEntry's receipt of its own (None: its run's, the usual case), and its run, read in C
OWN_RECEIPT = attrgetter("_receipt")
RUN = attrgetter("run")


_new_object = object.__new__


def now_ms() -> int:
    return int(time.time() * 1000)


class PopEntry(PoppedMessage):
    """One popped message in flight; ``receipt`` is the newest the broker gave for it.

    The popped message itself (the pop answer's decoder makes each message as one, ``message_class``), with
    what the consumer keeps of it in flight: one object per popped message, not a message and an entry.
    ``message`` is the entry itself, for the paths that read the message's fields through it. Identity
    equality and hash, as a message's.

    It keeps what the per-job paths read of every message as its own attributes (``visible_at``: when its
    invisibility lapses under its current receipt, its run's until an extension gives it one of its own,
    kept in step by the ``receipt`` setter; ``order``: its place in a job), so those paths read them with
    ``operator.attrgetter`` over a whole job, in C. What few messages set (an extension on the wire, the
    count of extensions, a receipt of their own) is read from the class's defaults until set. An
    extension's new receipt keeps the message's broker, queue and offset."""

    __slots__ = ("visible_at", "order", "settled")

    #: an extension on the wire: an ack waits for it, then uses the receipt it brought
    extending: "asyncio.Future[None] | None" = None
    extensions: int = 0

    def __init__(self, record: memoryview, topic: str, ack_topic: str, receipt: ReceiptHandle, reconsume_times: int,
                 first_pop_time: int = UNREAD, tags: str | None = UNREAD, order_count: int | None = None,
                 props: bytes | int = b"", pop_time: int = 0, stored: int = 0) -> None:
        super().__init__(record, topic, ack_topic, receipt, reconsume_times, first_pop_time, tags, order_count,
                         props, pop_time, stored)
        run = self.run
        self.visible_at = run.visible_at
        #: where a job puts it: queue by queue, each in offset order (offsets are Java longs: under 2**63)
        self.order = run.order_base | self.queue_offset
        self.settled = False

    @classmethod
    def of_run(cls, record: memoryview, run: PopRun, offset: int, reconsume_times: int, props: bytes | int,
               stored: int) -> "PopEntry":
        """:meth:`PoppedMessage.of_run` with the entry's own fields (one Python call per message, not two)."""
        self = _new_object(cls)
        self.record = record
        self.run = run
        self.queue_offset = offset
        self.reconsume_times = reconsume_times
        self._props = props
        self.stored = stored
        self.visible_at = run.visible_at
        self.order = run.order_base | offset
        self.settled = False
        return self

    @property
    def message(self) -> "PopEntry":
        """The popped message: the entry itself."""
        return self

    @property
    def offset(self) -> int:
        """Its queue offset (the message's own: an extension keeps it)."""
        return self.queue_offset

    @PoppedMessage.receipt.setter  # the message's getter (its own receipt, else its run's), with a setter
    def receipt(self, receipt: ReceiptHandle) -> None:
        self._receipt = receipt
        self.visible_at = receipt.pop_time + receipt.invisible_time

    def __repr__(self) -> str:
        return (f"PopEntry(offset={self.queue_offset}, receipt={self.receipt.encode()!r}, settled={self.settled}, "
                f"extensions={self.extensions})")

    @classmethod
    def of(cls, message: PoppedMessage) -> "PopEntry":
        """An entry for a message made as a plain :class:`PoppedMessage` (its fields, read or not, kept)."""
        entry = cls.of_run(message.record, message.run, message.queue_offset, message.reconsume_times,
                           message._props, message.stored)
        entry._extras(message._first_pop_time, message._tags, message.order_count)
        if message._receipt is not None:
            entry.receipt = message._receipt
        return entry

    def visible_at_ms(self) -> int:
        return self.visible_at

    def is_pop_timeout(self, now: int | None = None) -> bool:
        """Java isPopTimeout: its invisibility has lapsed, so the broker may have handed it to another client."""
        return (now_ms() if now is None else now) >= self.visible_at

    def needs_extension(self, now: int, fraction: float) -> bool:
        """Unsettled, no extension on the wire, and ``fraction`` of its invisible time gone."""
        if self.settled or self.extending is not None:
            return False
        r = self.receipt
        return now >= r.pop_time + int(r.invisible_time * fraction)

    def settle_now(self) -> ReceiptHandle | None:
        """:meth:`settle` without a coroutine when no extension is on the wire (the common case, once per
        message on the ack path); None when one is, and :meth:`settle` must wait for it."""
        if self.extending is not None:
            return None
        self.settled = True
        return self.receipt

    async def settle(self) -> ReceiptHandle:
        """Mark it settled (no more extensions) and return the receipt to act with, once any extension
        already sent has answered."""
        self.settled = True
        while self.extending is not None:
            await asyncio.shield(self.extending)
        return self.receipt


@dataclass(slots=True, eq=False)
class PopProcessQueue:
    """The un-acknowledged messages popped for one assignment (Java ``PopProcessQueue``)."""

    mq: MessageQueue
    dropped: bool = False
    entries: set[PopEntry] = field(default_factory=set)
    #: epoch ms of the latest pop request sent for it
    last_pop_ms: int = 0
    #: messages the pops on the wire may bring (``pop_batch_size`` each): flow control counts them as un-acked
    #: (changed through :meth:`reserve` / :meth:`release`, which wake the loops it held)
    popping: int = 0
    #: (count, future): each resolved once the un-acked messages plus what the pops on the wire may bring are
    #: back to its count (by :meth:`done`, :meth:`done_all` or :meth:`release`); wakes the pop loops held by
    #: flow control
    _room: list[tuple[int, "asyncio.Future[None]"]] = field(default_factory=list, repr=False)

    @property
    def wait_ack_count(self) -> int:
        return len(self.entries)

    @property
    def held(self) -> int:
        """What flow control counts: the un-acked messages plus what the pops on the wire may bring."""
        return len(self.entries) + self.popping

    def reserve(self, n: int) -> None:
        """A pop of ``n`` messages at most goes on the wire: they count as un-acked until it answers."""
        self.popping += n

    def release(self, n: int) -> None:
        """A pop reserved with ``n`` answered (what it brought is in :attr:`entries` by now) or failed: its
        reservation ends, and a loop held for room wakes if a short or empty answer made some."""
        self.popping -= n
        if self._room:
            self._wake()

    def add(self, entries: Iterable[PopEntry]) -> None:
        self.entries.update(entries)

    def done(self, entry: PopEntry) -> None:
        """Its outcome is decided (a success's ack may still be on its way): it no longer counts against flow
        control."""
        entry.settled = True
        self.entries.discard(entry)
        if self._room:
            self._wake()

    def done_all(self, entries: list[PopEntry]) -> None:
        """:meth:`done` for a whole job's messages at once: the set updated in one C call and the pop loops
        waiting for room woken once, not once per message."""
        for entry in entries:
            entry.settled = True
        self.entries.difference_update(entries)
        if self._room:
            self._wake()

    def _wake(self) -> None:
        """Wake each pop loop waiting for room whose threshold the un-acked count is back to."""
        left = self.held
        for at, room in self._room:
            if left <= at and not room.done():
                room.set_result(None)

    async def wait_for_room(self, threshold: int, timeout: float) -> None:
        """Return once at most ``threshold`` messages are un-acked, those the pops on the wire may bring
        counted (:attr:`held`), or after ``timeout`` s at the latest.

        Flow control wakes the pop loop the moment acks make room (a fixed 50 ms retry, as Java's, left the
        workers idle most of the time: 96 no-op messages take a few ms). A bare future and a timer, not
        ``asyncio.wait_for`` on an event (a task per wait: a no-op POP drain's pop loops wait here per pop).

        The pops on the wire are counted at each wake, not when the wait began: a loop that had subtracted
        them from its threshold kept waiting for room the answers of those pops had already made (their
        messages in :attr:`entries`, their reservation gone), and one whose threshold the pops alone
        exceeded returned at once with nothing un-acked and spun without yielding (a threshold under two
        pops' worth hung the event loop)."""
        if self.held <= threshold:
            return
        loop = asyncio.get_running_loop()
        room: asyncio.Future[None] = loop.create_future()
        waiter = (threshold, room)
        self._room.append(waiter)
        timer = loop.call_later(timeout, _time_up, room)
        try:
            await room
        finally:
            timer.cancel()
            self._room.remove(waiter)


def _time_up(room: "asyncio.Future[None]") -> None:
    if not room.done():
        room.set_result(None)


@dataclass(slots=True, eq=False)
class PopJobView:
    """What one POP job hands the executor as its queue (:attr:`ConsumeJob.pq`).

    ``dropped`` once the assignment is, or once a message of the job has outlived its invisible time before
    its call began (Java ``isPopTimeout``, checked as a ConsumeRequest starts): the executor then does not
    start it (NOT_RUN), since the broker may have handed those messages to another client already. Being
    its own object, it also lets the executor say which of *this job's* messages have begun
    (``handler_call_indexes``: by index in the job, which may hold equal offsets of several queues)."""

    pq: PopProcessQueue
    entries: list[PopEntry]

    @property
    def dropped(self) -> bool:
        if self.pq.dropped:
            return True
        return bool(self.entries) and now_ms() >= min(map(VISIBLE_AT, self.entries))


@dataclass(slots=True)
class PopRequest:
    """One assignment being popped: the queue (queue id -1 = every queue of the topic on that broker)."""

    mq: MessageQueue
    pq: PopProcessQueue
    #: ConsumeInitMode: 0 MIN (CONSUME_FROM_FIRST_OFFSET), 1 MAX (anything else), as RebalancePushImpl says
    init_mode: int = 1
    task: "asyncio.Task[None] | None" = field(default=None, repr=False)
    #: set to end the pop loop after the pop on the wire has answered (its messages are still consumed and
    #: acked): a switch to pull stops popping without leaving popped messages to the broker's clock
    stopping: bool = False
    #: set when ``mq`` is a pop retry topic popped on its own (``pop_retry_drain.py``): the topic its messages
    #: are handed out under
    original_topic: str | None = None
    #: how many queues the assignment covers: 1 for one queue; for queue id -1 the topic's readable queues on
    #: that broker (from the route, kept current by each assignment refresh). Flow control and the pops on the
    #: wire scale with it (``pop_loop.window``, ``pop_loop.pops_in_flight``)
    queues: int = 1


@dataclass(slots=True, eq=False)
class HandedJob:
    """A job at the executor: its queue, messages, view, the executor's future and when it was handed over."""

    mq: MessageQueue
    live: list[PopEntry]
    view: PopJobView
    job: ConsumeJob
    future: "asyncio.Future[JobResult]"
    started: float
