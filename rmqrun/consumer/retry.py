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
from rmqrun.client.producer import OutgoingMessage, Producer
from rmqrun.consumer.config import retry_topic
from rmqrun.consumer.executor import RecordData
from rmqrun.model import Message
from rmqrun.remoting import message as codec

INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
_INT = struct.Struct(">i")


def decode_for_retry(record: RecordData, broker_name: str) -> Message:
    """The message as the handler saw it: body inflated, retry topic restored."""
    msg, _ = codec.decode_message(record, broker_name=broker_name)
    real = msg.properties.get(codec.PROPERTY_RETRY_TOPIC)
    if real:
        msg.topic = real
    return msg


def reconsume_times_position(record: RecordData) -> int:
    """Byte position of RECONSUMETIMES in a stored record (after both host fields)."""
    (sys_flag,) = _INT.unpack_from(record, codec.SYSFLAG_POS)
    pos = codec.BORN_HOST_POS + (20 if sys_flag & codec.SYSFLAG_BORNHOST_V6 else 8) + 8
    return pos + (20 if sys_flag & codec.SYSFLAG_STOREHOST_V6 else 8)


def reconsume_times(record: RecordData) -> int:
    return _INT.unpack_from(record, reconsume_times_position(record))[0]


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
    """Sends failed messages of one consumer group back to their broker."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group
        self._producer: Producer | None = None

    async def _fallback_producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(instance=self.instance, group=INNER_PRODUCER_GROUP)
            await self._producer.start()
        return self._producer

    async def close(self) -> None:
        if self._producer is not None:
            producer, self._producer = self._producer, None
            await producer.close()

    async def send_back(self, record: RecordData, broker_name: str, delay_level: int,
                        max_reconsume_times: int) -> bool:
        """True when the broker (or the retry topic) has the message; False: keep it and retry later."""
        msg = decode_for_retry(record, broker_name)
        addr = self.instance.broker_address(broker_name) if broker_name else None
        addr = addr or msg.store_host
        try:
            await self.instance.broker.consumer_send_msg_back(
                addr, group=self.group, commit_log_offset=msg.commit_log_offset, delay_level=delay_level,
                origin_msg_id=msg.msg_id, origin_topic=msg.topic, max_reconsume_times=max_reconsume_times,
                broker_name=broker_name or None)
            return True
        except Exception as exc:
            logger.warning("send-back of {} to {} failed ({}); re-publishing to {}", msg.msg_id, addr, exc,
                           retry_topic(self.group))
        return await self.republish(msg, max_reconsume_times, msg.reconsume_times + 1)

    async def republish(self, msg: Message, max_reconsume_times: int, reconsume_time: int) -> bool:
        """sendMessageBackAsNormalMessage: a copy on the retry topic with the retry properties.

        Also the orderly service's way to the DLQ: with ``reconsume_time`` at
        ``max_reconsume_times`` the broker stores it in ``%DLQ%<group>``.
        """
        props = dict(msg.properties)
        props.setdefault(codec.PROPERTY_ORIGIN_MESSAGE_ID, msg.msg_id)
        props[codec.PROPERTY_RETRY_TOPIC] = msg.topic
        props[codec.PROPERTY_RECONSUME_TIME] = str(reconsume_time)
        props[codec.PROPERTY_MAX_RECONSUME_TIMES] = str(max_reconsume_times)
        props.pop(codec.PROPERTY_DELAY_TIME_LEVEL, None)
        out = OutgoingMessage(body=msg.body, properties=props, delay_level=3 + msg.reconsume_times, flag=msg.flag)
        try:
            producer = await self._fallback_producer()
            await producer.send_message(retry_topic(self.group), out)
            return True
        except Exception as exc:
            logger.error("re-publishing {} to {} failed too: {}; it stays cached and is retried",
                         msg.msg_id, retry_topic(self.group), exc)
            return False
