"""Re-publishing a message to its group's retry topic as an ordinary message.

Java's ``sendMessageBackAsNormalMessage``: a copy of the message goes to
``%RETRY%<group>`` carrying the retry properties (origin message id, retry
topic, reconsume count and its maximum), so the broker treats it as a
retried message (and moves it to ``%DLQ%<group>`` when the count reached the
maximum). It is only a producer send with the right properties, so it stands
on the client layer: the push consumer's send-back falls back to it, and the
Spark runner republishes failed messages with it without depending on the
push consumer's logic.
"""

from __future__ import annotations

from loguru import logger

from rmqrun.client.instance import ClientInstance
from rmqrun.client.producer import OutgoingMessage, Producer
from rmqrun.model import Message
from rmqrun.remoting import message_props as codec
from rmqrun.topic_names import retry_topic

#: the Java client's inner producer group, which its re-publishes name (rmqrun names the consumer group instead)
INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"


def retry_copy(msg: Message, max_reconsume_times: int, reconsume_time: int) -> OutgoingMessage:
    """The copy of ``msg`` to send to the retry topic, with the retry properties set."""
    props = dict(msg.properties)
    props.setdefault(codec.PROPERTY_ORIGIN_MESSAGE_ID, msg.msg_id)
    props[codec.PROPERTY_RETRY_TOPIC] = msg.topic
    props[codec.PROPERTY_RECONSUME_TIME] = str(reconsume_time)
    props[codec.PROPERTY_MAX_RECONSUME_TIMES] = str(max_reconsume_times)
    props.pop(codec.PROPERTY_DELAY_TIME_LEVEL, None)
    return OutgoingMessage(body=msg.body, properties=props, delay_level=3 + msg.reconsume_times, flag=msg.flag)


class RetryPublisher:
    """Re-publishes messages of one consumer group to ``%RETRY%<group>`` through an inner producer.

    The inner producer's group is the consumer group itself, where the Java client names
    ``CLIENT_INNER_PRODUCER``. A broker derives the retry and dead-letter handling from the topic,
    never from the producer group, so nothing changes there; but an ACL broker (4.9.8
    ``PlainAccessValidator``) checks a send to a retry topic as a send-back, with SUB on the retry
    topic of the producer group the request names. Named this way, the account's own group
    permission (which consuming needs anyway) covers it; named ``CLIENT_INNER_PRODUCER`` it is
    refused unless the account may also use that group, and the orderly consumer could not dead-letter.
    """

    def __init__(self, instance: ClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group
        self._producer: Producer | None = None

    async def _inner_producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(instance=self.instance, group=self.group)
            await self._producer.start()
        return self._producer

    async def close(self) -> None:
        if self._producer is not None:
            producer, self._producer = self._producer, None
            await producer.close()

    async def republish(self, msg: Message, max_reconsume_times: int, reconsume_time: int) -> bool:
        """True when the retry topic stored the copy; False (logged) otherwise. Never raises.

        With ``reconsume_time`` at ``max_reconsume_times`` the broker stores the
        copy in ``%DLQ%<group>`` instead: the orderly service's way to the DLQ.
        """
        topic = retry_topic(self.group)
        try:
            producer = await self._inner_producer()
            await producer.send_message(topic, retry_copy(msg, max_reconsume_times, reconsume_time))
            return True
        except Exception as exc:
            logger.error("re-publishing {} to {} failed too: {}; it stays cached and is retried",
                         msg.msg_id, topic, exc)
            return False
