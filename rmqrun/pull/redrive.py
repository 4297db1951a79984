"""Re-driving dead letters: sending them from ``%DLQ%<group>`` back to a topic, each once.

A re-drive is a consumer of the DLQ like any other: a group of its own (by
default ``<group>-redrive``, :func:`redrive_group`) holds, per DLQ queue, the
offset up to which the DLQ has been handled, committed on the broker after
every message moved. A second run starts where the first stopped, so nothing
is re-driven twice, and the DLQ itself is never changed (RocketMQ has no
per-message delete): ``rmqrun dlq list`` still shows every dead letter, marked
by whether the re-drive group is past it.

What a run takes is the DLQ from the group's offset to the queue's end as it
was when the run began, read in offset order. Messages the filter leaves out
are passed over: the offset moves past them too, so a later run of the same
re-drive group will not see them (a different ``--redrive-group``, or
``rmqrun offsets reset`` of this one, reads them again). ``--until`` is the
exception: the run stops at the first message stored after that time and the
offset stays there. A message that cannot be sent stops the run with the
offset on it, so it is the first one the next run tries.

The copy keeps the body, keys, tags, user properties and the message id
(``UNIQ_KEY``, so an idempotent handler recognises it) and drops the
retry bookkeeping the broker and the client added on the way to the DLQ
(:data:`BOOKKEEPING`). ``RMQRUN_REDRIVEN_FROM`` says where it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from rmqrun.client.producer import OutgoingMessage
from rmqrun.errors import RmqrunError
from rmqrun.model import Message, MessageQueue
from rmqrun.namespace import unwrap
from rmqrun.pull.dead_letters import DeadLetterQueue, DlqFilter, QueueBounds, UndecodableRecord, origin_topic
from rmqrun.remoting import message_props as codec

if TYPE_CHECKING:
    from rmqrun.client.producer import Producer

#: the property a re-driven copy carries: ``%DLQ%<group>@<broker>:<queue>:<offset>`` of the dead letter
REDRIVE_PROPERTY = "RMQRUN_REDRIVEN_FROM"

#: properties of a dead letter that describe its retries, not the message: never copied
BOOKKEEPING = frozenset({
    codec.PROPERTY_RETRY_TOPIC, codec.PROPERTY_ORIGIN_MESSAGE_ID, codec.PROPERTY_RECONSUME_TIME,
    codec.PROPERTY_MAX_RECONSUME_TIMES, codec.PROPERTY_DELAY_TIME_LEVEL, codec.PROPERTY_WAIT_STORE_MSG_OK,
    codec.PROPERTY_CLUSTER, codec.PROPERTY_MIN_OFFSET, codec.PROPERTY_MAX_OFFSET, codec.PROPERTY_REAL_TOPIC,
    codec.PROPERTY_REAL_QUEUE_ID, codec.PROPERTY_CONSUME_START_TIMESTAMP, codec.PROPERTY_TRANSACTION_PREPARED,
    "PGROUP", REDRIVE_PROPERTY,
})


class RedriveError(RmqrunError):
    """A re-drive stopped before its end; the offset stays on the message it could not move."""


def redrive_group(group: str) -> str:
    """The default group whose offsets say how far ``group``'s DLQ has been re-driven."""
    return f"{group}-redrive"


def redrive_copy(msg: Message, dlq_mq: MessageQueue, namespace: str | None = None) -> OutgoingMessage:
    """The message to send back: body, keys, tags, user properties and id kept; retry bookkeeping dropped."""
    props = {k: v for k, v in msg.properties.items() if k not in BOOKKEEPING}
    where = unwrap(namespace, dlq_mq.topic) if namespace else dlq_mq.topic
    props[REDRIVE_PROPERTY] = f"{where}@{dlq_mq.broker_name}:{dlq_mq.queue_id}:{msg.queue_offset}"
    return OutgoingMessage(body=msg.body, properties=props, flag=msg.flag)


@dataclass(frozen=True, slots=True)
class Moved:
    """One dead letter re-driven (or, in a dry run, that would be)."""

    message: Message
    target: str
    new_msg_id: str | None


@dataclass
class RedriveReport:
    """What a run did: per DLQ queue, its range and where the re-drive group's offset now is."""

    moved: list[Moved] = field(default_factory=list)
    passed_over: int = 0
    undecodable: int = 0
    #: per queue: (bounds when the run began, the offset committed, or that would be in a dry run)
    queues: list[tuple[QueueBounds, int]] = field(default_factory=list)


class Redriver:
    """Moves the dead letters ``selected`` lets through to ``to_topic`` or their original topic.

    ``dlq`` reads through a pull consumer of the re-drive group, whose offsets are
    committed here; ``producer`` sends the copies. ``dry_run`` reads and reports but
    sends and commits nothing. ``limit`` stops after that many messages moved.
    """

    def __init__(self, dlq: DeadLetterQueue, producer: "Producer | None", selected: DlqFilter, *,
                 to_topic: str | None = None, dry_run: bool = False, limit: int | None = None,
                 namespace: str | None = None, on_moved: Callable[[Moved], None] = lambda m: None) -> None:
        if producer is None and not dry_run:
            raise ValueError("a re-drive that sends needs a producer")
        self.dlq = dlq
        self.producer = producer
        self.selected = selected
        self.to_topic = to_topic
        self.dry_run = dry_run
        self.limit = limit
        self.namespace = namespace
        self.on_moved = on_moved
        self.report = RedriveReport()
        #: the offset last stored per queue by this run
        self._stored: dict[MessageQueue, int] = {}

    @property
    def _full(self) -> bool:
        return self.limit is not None and len(self.report.moved) >= self.limit

    async def run(self) -> RedriveReport:
        for mq in await self.dlq.queues():
            if self._full:
                break
            bounds = await self.dlq.bounds(mq)
            position = await self._queue(bounds)
            self.report.queues.append((bounds, position))
        return self.report

    async def _queue(self, bounds: QueueBounds) -> int:
        """Re-drive one DLQ queue from the group's offset; returns the offset it stops at."""
        position = bounds.start
        try:
            async for item in self.dlq.read(bounds.mq, bounds.start, bounds.high):
                if self._full:
                    break
                if isinstance(item, UndecodableRecord):
                    self.report.undecodable += 1
                    position = item.queue_offset + 1
                    continue
                until = self.selected.until_ms
                if until is not None and item.store_timestamp > until:
                    break  # stored after --until: this and what follows stay for a later run
                if self.selected.matches(item):
                    await self._move(bounds.mq, item)
                else:
                    self.report.passed_over += 1
                position = item.queue_offset + 1
        except BaseException:
            # what was passed over before the failure is done with; the failed message is not
            try:
                await self._commit(bounds, position)
            except Exception:
                pass  # the failure that stopped the run is the one to report
            raise
        await self._commit(bounds, position)
        return position

    async def _move(self, mq: MessageQueue, msg: Message) -> None:
        target = self.to_topic or origin_topic(msg, self.namespace)
        if not target:
            raise RedriveError(f"dead letter at {mq.broker_name}:{mq.queue_id}@{msg.queue_offset} (id {msg.msg_id}) "
                               "names no original topic (no RETRY_TOPIC property): give --to-topic")
        new_id = None
        if not self.dry_run:
            assert self.producer is not None
            try:
                sent = await self.producer.send_message(target, redrive_copy(msg, mq, self.namespace))
            except Exception as exc:
                raise RedriveError(f"sending the dead letter at {mq.broker_name}:{mq.queue_id}@{msg.queue_offset} "
                                   f"(id {msg.msg_id}) to {target} failed: {exc}") from exc
            new_id = sent.offset_msg_id
            # committed at once: a crash after this message re-drives none of it again
            await self._store(mq, msg.queue_offset + 1)
        moved = Moved(msg, target, new_id)
        self.report.moved.append(moved)
        self.on_moved(moved)

    async def _commit(self, bounds: QueueBounds, position: int) -> None:
        """Store the offset the run reached (moved messages are stored one by one as they go)."""
        if not self.dry_run and position != self._stored.get(bounds.mq, bounds.redriven_to):
            await self._store(bounds.mq, position)

    async def _store(self, mq: MessageQueue, offset: int) -> None:
        await self.dlq.consumer.update_consume_offset(mq, offset)
        await self.dlq.consumer.persist_consume_offsets()
        self._stored[mq] = offset
