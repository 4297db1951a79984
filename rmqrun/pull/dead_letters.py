"""Reading a consumer group's dead-letter queue, ``%DLQ%<group>``, with a pull consumer.

A DLQ is an ordinary topic the broker writes when it gives up on a message
(one queue per broker, Java's ``DLQ_NUMS_PER_GROUP``). What makes a dead
letter useful to an operator is in its properties, which the broker copies
from the failed message: ``RETRY_TOPIC`` (the topic it was consumed from),
``ORIGIN_MESSAGE_ID``, the keys and tags, and its reconsume count. This module
reads those, filters by store time, key and message id, and tells two cases
apart that the name server alone answers the same way: a group that never
dead-lettered anything (no ``%DLQ%<group>`` topic: an empty DLQ), and a DLQ
that exists but cannot be read (a RocketMQ 4.x broker creates it write-only,
perm 2, so ``mqadmin`` and the Dashboard cannot read it either until its
permission is changed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AsyncIterator

from rmqrun.errors import RmqrunError
from rmqrun.model import Message, MessageQueue
from rmqrun.namespace import unwrap
from rmqrun.pull.errors import TopicNotFoundError
from rmqrun.pull.result import PullResult, PullStatus
from rmqrun.remoting import message_props
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import AccessDeniedError, BrokerError, ProtocolError, TopicNotExistError
from rmqrun.topic_names import dlq_topic, group_of_dlq_topic, is_dlq_topic, is_retry_topic, original_topic

if TYPE_CHECKING:
    from rmqrun.pull.async_consumer import AsyncPullConsumer

#: messages asked for per pull (the broker's default transfer limit)
PULL_BATCH = 32


class DlqNotReadableError(RmqrunError):
    """``%DLQ%<group>`` exists but its queues cannot be read (its permission lacks read)."""


@dataclass(frozen=True, slots=True)
class UndecodableRecord:
    """A DLQ record that does not decode (what rmqrun dead-letters as stored): where, and why."""

    mq: MessageQueue
    queue_offset: int
    error: str


def keys_of(msg: Message) -> list[str]:
    """The message's keys (KEYS holds them separated by spaces)."""
    return [k for k in msg.properties.get(message_props.PROPERTY_KEYS, "").split(" ") if k]


def ids_of(msg: Message) -> set[str]:
    """Every id an operator may know a dead letter by: the client id (UNIQ_KEY), the broker (offset)
    ids of the dead letter and of the message it was made from."""
    ids = {msg.msg_id, msg.offset_msg_id, msg.properties.get(message_props.PROPERTY_ORIGIN_MESSAGE_ID, "")}
    return {i for i in ids if i}


def wire_origin_topic(msg: Message) -> str | None:
    """The topic the dead letter was first sent to, as the cluster names it (under the namespace), if known.

    ``RETRY_TOPIC`` holds it. A message dead-lettered from a POP retry topic by a broker that did not copy
    the original topic into the property (rmqrun's embedded broker before issue #31, brokers older than
    Java's reviveRetry keeping it) names ``%RETRY%<group>_<topic>`` (V1) or ``%RETRY%<group>+<topic>`` (V2)
    there instead: that stands for ``<topic>``, the group being the one whose DLQ this is."""
    topic = msg.properties.get(message_props.PROPERTY_RETRY_TOPIC)
    if not topic:
        return None
    if is_retry_topic(topic) and is_dlq_topic(msg.topic):
        return original_topic(topic, group_of_dlq_topic(msg.topic))
    return topic


def origin_topic(msg: Message, namespace: str | None = None) -> str | None:
    """The topic the message was consumed from (``RETRY_TOPIC``, as the user names it), if known."""
    topic = wire_origin_topic(msg)
    if not topic:
        return None
    return unwrap(namespace, topic) if namespace else topic


@dataclass(frozen=True, slots=True)
class DlqFilter:
    """Which dead letters a command takes: all of these that are given must hold.

    ``since_ms`` / ``until_ms`` bound the time the DLQ stored the message (when it was
    dead-lettered), both inclusive; ``keys`` and ``msg_ids`` match any one of theirs;
    ``topics`` are original topics (``RETRY_TOPIC``, on the wire: under the namespace).
    """

    since_ms: int | None = None
    until_ms: int | None = None
    keys: frozenset[str] = field(default_factory=frozenset)
    msg_ids: frozenset[str] = field(default_factory=frozenset)
    topics: frozenset[str] = field(default_factory=frozenset)

    @property
    def active(self) -> bool:
        return bool(self.since_ms is not None or self.until_ms is not None or self.keys or self.msg_ids
                    or self.topics)

    def matches(self, msg: Message) -> bool:
        if self.since_ms is not None and msg.store_timestamp < self.since_ms:
            return False
        if self.until_ms is not None and msg.store_timestamp > self.until_ms:
            return False
        if self.keys and not self.keys.intersection(keys_of(msg)):
            return False
        if self.topics and wire_origin_topic(msg) not in self.topics:
            return False
        return not self.msg_ids or bool(self.msg_ids & ids_of(msg))


@dataclass(frozen=True, slots=True)
class QueueBounds:
    """One DLQ queue's stored range ``[low, high)`` and the re-drive group's offset (-1: none yet)."""

    mq: MessageQueue
    low: int
    high: int
    redriven_to: int = -1

    @property
    def start(self) -> int:
        """Where a re-drive continues: the group's offset, never below what is still stored."""
        return max(self.redriven_to, self.low)


class DeadLetterQueue:
    """The DLQ of ``group``, read through ``consumer`` (whose own group holds the re-drive offsets)."""

    def __init__(self, consumer: "AsyncPullConsumer", group: str) -> None:
        self.consumer = consumer
        self.group = group
        self.topic = dlq_topic(group)

    async def queues(self) -> list[MessageQueue]:
        """The DLQ's queues; none when the group has no DLQ (nothing was ever dead-lettered).

        The name server answers "no route" for a DLQ that does not exist and a route
        without readable queues for a write-only one: the first is an empty DLQ, the
        second :class:`DlqNotReadableError`.
        """
        try:
            return await self.consumer.fetch_subscribe_message_queues(self.topic)
        except TopicNotFoundError as exc:
            if isinstance(exc.__cause__, TopicNotExistError):
                return []
            raise self._not_readable() from exc

    def _not_readable(self) -> DlqNotReadableError:
        return DlqNotReadableError(
            f"{self.topic} exists but is not readable (RocketMQ 4.x brokers create a DLQ write-only, perm 2); "
            f"make it readable with `rmqrun topic update {self.topic} --perm rw` "
            f"(or `mqadmin updateTopicPerm -t {self.topic} -p 6`)")

    async def bounds(self, mq: MessageQueue, *, with_offset: bool = True) -> QueueBounds:
        low, high = await self.consumer.min_offset(mq), await self.consumer.max_offset(mq)
        redriven = await self.consumer.fetch_consume_offset(mq) if with_offset else -1
        return QueueBounds(mq, low, high, redriven)

    async def read(self, mq: MessageQueue, start: int, end: int) -> AsyncIterator[Message | UndecodableRecord]:
        """Every message of ``mq`` from ``start`` up to (not including) ``end``, in offset order.

        A DLQ holds the records rmqrun dead-lettered because they do not decode: a batch
        that does not decode is read again one message at a time, and the record that fails
        comes out as an :class:`UndecodableRecord`, so one bad record hides no other.
        """
        offset, batch = start, PULL_BATCH
        while offset < end:
            try:
                result = await self._pull(mq, offset, min(batch, end - offset))
            except ProtocolError as exc:
                if batch > 1:
                    batch = 1
                    continue
                yield UndecodableRecord(mq, offset, str(exc))
                offset, batch = offset + 1, PULL_BATCH
                continue
            for msg in result.messages:
                if msg.queue_offset >= end:
                    return
                yield msg
            if result.status is PullStatus.NO_NEW_MSG or result.next_begin_offset <= offset:
                return
            offset, batch = result.next_begin_offset, PULL_BATCH

    async def _pull(self, mq: MessageQueue, offset: int, n: int) -> PullResult:
        try:
            return await self.consumer.pull(mq, None, offset, n)
        except AccessDeniedError:
            raise
        except BrokerError as exc:
            if exc.code == ResponseCode.NO_PERMISSION:
                raise self._not_readable() from exc
            raise
