"""Returning failed messages to the broker: send-back, its fallback, and the DLQ path.

Java's ``DefaultMQPushConsumerImpl.sendMessageBack``: first CONSUMER_SEND_MSG_BACK
to the broker that holds the message (the broker moves it to
``%RETRY%<group>`` with a delay, or to ``%DLQ%<group>`` once the reconsume
count reaches the maximum). If that fails, the client re-publishes a copy to
the retry topic as an ordinary message carrying the retry properties. Only if
both fail does the caller keep the message and try again later; nothing is
ever dropped here.
"""

from __future__ import annotations

import struct

from loguru import logger

from rmqrun.client.instance import ClientInstance
from rmqrun.client.republish import RetryPublisher
from rmqrun.consumer.dead_letters import (
    DeadLetterReason, DeadLetters, Failure, goes_to_dlq_on_republish, goes_to_dlq_on_send_back,
)
from rmqrun.model import Message, RecordData
from rmqrun.remoting import message as codec
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.message_props import PROPERTY_RETRY_TOPIC
from rmqrun.topic_names import original_topic

_INT = struct.Struct(">i")


def decode_for_retry(record: RecordData, broker_name: str) -> Message:
    """The message as the handler saw it: body inflated, retry topic restored."""
    msg, _ = codec.decode_message(record, broker_name=broker_name)
    real = msg.properties.get(PROPERTY_RETRY_TOPIC)
    if real:
        msg.topic = real
    return msg


def undecodable_label(record: RecordData, mq: object) -> str:
    """How a record that does not decode is named in the logs: queue, offset and offset msg id."""
    try:
        ids = codec.record_ids(record)
    except ProtocolError:
        return f"an unreadable record of {mq}"
    return f"message {ids.offset_msg_id} ({mq}, queue offset {ids.queue_offset})"


def origin_of(topic: str, group: str) -> str:
    """The topic a message consumed from ``topic`` was first sent to: a POP retry topic
    (``%RETRY%<group>_<topic>`` V1, ``%RETRY%<group>+<topic>`` V2) stands for its ``<topic>``; any other is
    itself. Every mode names a dead letter's origin with this, so ``dlq --topic T`` and a re-drive find it."""
    return original_topic(topic, group)


def _send_back_fields(record: RecordData, group: str) -> tuple[codec.RecordIds, str, str]:
    """(ids, message id, original topic) for CONSUMER_SEND_MSG_BACK, without inflating the body.

    The properties give the client message id and the original topic of a retried
    message; when they do not decode the record's own fields stand in for them.
    """
    ids = codec.record_ids(record)
    try:
        head, _ = codec.decode_message(record, decompress=False)
    except ProtocolError:
        return ids, ids.offset_msg_id, origin_of(ids.topic, group)
    return ids, head.msg_id, origin_of(head.properties.get(PROPERTY_RETRY_TOPIC) or head.topic, group)


def reconsume_times_position(record: RecordData) -> int:
    """Byte position of RECONSUMETIMES in a stored record (after both host fields)."""
    (sys_flag,) = _INT.unpack_from(record, codec.SYSFLAG_POS)
    store_host = codec.store_timestamp_pos(sys_flag) + 8
    return store_host + (20 if sys_flag & codec.SYSFLAG_STOREHOST_V6 else 8)


def reconsume_times(record: RecordData) -> int:
    return _INT.unpack_from(record, reconsume_times_position(record))[0]


def _attempts(record: RecordData) -> int:
    """Deliveries so far (the stored reconsume count + 1), for the dead-letter line; 0 when unreadable."""
    try:
        return reconsume_times(record) + 1
    except (struct.error, IndexError):
        return 0


def with_reconsume_times(record: RecordData, times: int) -> bytearray:
    """A copy of the record whose reconsume count says ``times``.

    The orderly service and the local-retry path count retries on the cached
    copy, as Java does with ``msg.setReconsumeTimes``; the worker then sees
    the count in ``msg.reconsume_times``.
    """
    out = bytearray(record)
    _INT.pack_into(out, reconsume_times_position(out), times)
    return out


class SendBack:
    """Sends failed messages of one consumer group back to their broker.

    Every path to ``%DLQ%<group>`` goes through here, so this is where a dead letter is
    recognised (by the broker's own rule, see :mod:`rmqrun.consumer.dead_letters`) and
    recorded in ``dead_letters``, once the broker has taken the message.
    """

    def __init__(self, instance: ClientInstance, group: str, dead_letters: DeadLetters | None = None) -> None:
        self.instance = instance
        self.group = group
        self.dead_letters = dead_letters or DeadLetters(group)
        self._republisher = RetryPublisher(instance, group)

    async def close(self) -> None:
        await self._republisher.close()

    async def send_back(self, record: RecordData, broker_name: str, delay_level: int,
                        max_reconsume_times: int, failure: Failure | None = None, *,
                        reason: DeadLetterReason | None = None) -> bool:
        """True when the broker (or the retry topic) has the message; False: keep it and retry later.

        The send-back names the message by its commit-log offset, so only the record's
        fixed fields and properties are read here; the body is inflated only for the
        re-publish fallback. Never raises: every failure is a False. ``failure`` (where the
        message was consumed, the handler's error) names it in the dead-letter line.
        ``reason``: why the caller sends it to the DLQ when it uses delay level -1 for its own
        decision (orderly POP at its limit); by default -1 means the handler asked for it.
        """
        try:
            ids, msg_id, origin_topic = _send_back_fields(record, self.group)
        except ProtocolError as exc:
            logger.error("a failed record of {} cannot be read for its send-back ({}); it stays cached",
                         broker_name, exc)
            return False
        if await self._send_msg_back(ids, msg_id, origin_topic, broker_name, delay_level, max_reconsume_times):
            attempts = _attempts(record)
            if goes_to_dlq_on_send_back(attempts - 1, delay_level, max_reconsume_times):
                if reason is None:
                    reason = DeadLetterReason.HANDLER if delay_level < 0 else DeadLetterReason.MAX_RECONSUME
                if reason is DeadLetterReason.HANDLER and failure is not None:
                    # the job's error belongs to another message of the batch, if to any: say what happened
                    failure = Failure(failure.mq, failure.offset, f"the handler asked for the DLQ (delay level "
                                                                  f"{delay_level})")
                self.dead_letters.record(reason, msg_id=msg_id, topic=origin_topic, attempts=attempts,
                                         failure=failure)
            return True
        try:
            msg = decode_for_retry(record, broker_name)
        except ProtocolError as exc:
            logger.error("{} cannot be re-published either: it does not decode ({}); it stays cached and is "
                         "retried", msg_id, exc)
            return False
        msg.topic = origin_topic
        return await self.republish(msg, max_reconsume_times, msg.reconsume_times + 1, failure)

    async def dead_letter_as_stored(self, record: RecordData, broker_name: str, max_reconsume_times: int,
                                    failure: Failure | None = None) -> bool:
        """Send a record straight to ``%DLQ%<group>`` by its commit-log offset (delay level -1).

        For a record that does not decode: the broker copies its own stored bytes
        (body still compressed, sysFlag and properties as they were) into the DLQ,
        so nothing needs to be decoded or re-encoded here. Never raises.
        """
        try:
            ids, msg_id, origin_topic = _send_back_fields(record, self.group)
        except ProtocolError as exc:
            logger.error("a record of {} is too damaged to name for the DLQ: {}", broker_name, exc)
            return False
        if not await self._send_msg_back(ids, msg_id, origin_topic, broker_name, -1, max_reconsume_times):
            return False
        self.dead_letters.record(DeadLetterReason.UNDECODABLE, msg_id=msg_id, topic=origin_topic,
                                 attempts=_attempts(record), failure=failure)
        return True

    async def _send_msg_back(self, ids: codec.RecordIds, msg_id: str, origin_topic: str, broker_name: str,
                             delay_level: int, max_reconsume_times: int) -> bool:
        addr = self.instance.broker_address(broker_name) if broker_name else None
        addr = addr or ids.store_host
        try:
            await self.instance.broker.consumer_send_msg_back(
                addr, group=self.group, commit_log_offset=ids.commit_log_offset, delay_level=delay_level,
                origin_msg_id=msg_id, origin_topic=origin_topic, max_reconsume_times=max_reconsume_times,
                broker_name=broker_name or None)
            return True
        except Exception as exc:
            logger.warning("send-back of {} to {} (delay level {}) failed: {}", msg_id, addr, delay_level, exc)
            return False

    async def republish(self, msg: Message, max_reconsume_times: int, reconsume_time: int,
                        failure: Failure | None = None) -> bool:
        """sendMessageBackAsNormalMessage (:class:`~rmqrun.client.republish.RetryPublisher`).

        Also the orderly service's way to the DLQ: with ``reconsume_time`` at
        ``max_reconsume_times`` the broker stores it in ``%DLQ%<group>``.
        """
        if not await self._republisher.republish(msg, max_reconsume_times, reconsume_time):
            return False
        if goes_to_dlq_on_republish(reconsume_time, max_reconsume_times):
            self.dead_letters.record(DeadLetterReason.MAX_RECONSUME, msg_id=msg.msg_id, topic=msg.topic,
                                     attempts=msg.reconsume_times + 1, failure=failure)
        return True
