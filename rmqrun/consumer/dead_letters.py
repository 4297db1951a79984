"""Counting and naming the messages this consumer sends to ``%DLQ%<group>``.

The broker, not the client, moves a message into the dead-letter queue: a
send-back (CONSUMER_SEND_MSG_BACK) or a re-publish to ``%RETRY%<group>``
lands in ``%DLQ%<group>`` when the broker's rule says so (Java
``SendMessageProcessor``: the stored reconsume count at or past the maximum,
or a negative delay level). Neither answer says where the message went, so
rmqrun applies the same rule to what it sent (:func:`goes_to_dlq_on_send_back`,
:func:`goes_to_dlq_on_republish`) and, once the broker has taken the message,
records it here: one counter per (original topic, reason) for
``rmqrun_messages_dead_lettered_total`` and one log line naming the message.

What it cannot see is written in ``docs/operations.md`` ("Dead letters"): a
broker whose own maximum is lower than the one the client sends (an old broker
that ignores the header's ``maxReconsumeTimes``), or anything another client of
the group dead-letters.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from loguru import logger

from rmqrun.model import MessageQueue
from rmqrun.namespace import unwrap
from rmqrun.topic_names import dlq_topic


class DeadLetterReason(str, enum.Enum):
    """Why a message was dead-lettered: the ``reason`` label, a small fixed set."""

    #: it failed max_reconsume_times + 1 times (concurrent send-back, orderly re-publish, consume timeout)
    MAX_RECONSUME = "max_reconsume"
    #: the handler asked for it: ``ReconsumeLater(delay_level=-1)`` (Java delayLevelWhenNextConsume = -1)
    HANDLER = "handler"
    #: the record does not decode (unknown compression, corrupt body or properties): never handled
    UNDECODABLE = "undecodable"


@dataclass(frozen=True, slots=True)
class Failure:
    """Where a failed message was consumed and what went wrong, for the dead-letter line."""

    mq: MessageQueue
    offset: int
    error: str | None = None


def goes_to_dlq_on_send_back(stored_reconsume_times: int, delay_level: int, max_reconsume_times: int) -> bool:
    """The broker's rule for CONSUMER_SEND_MSG_BACK, read on the record it stores (consumerSendMsgBack)."""
    return delay_level < 0 or stored_reconsume_times >= max_reconsume_times


def goes_to_dlq_on_republish(reconsume_time: int, max_reconsume_times: int) -> bool:
    """The broker's rule for a send to ``%RETRY%<group>`` (handleRetryAndDLQ): the header's count."""
    return reconsume_time >= max_reconsume_times


class DeadLetters:
    """The dead-lettered messages of one consumer group: counts by (topic, reason), one log line each.

    ``topics`` are the group's subscribed topics (user names): their series start at 0 for every
    reason, so an alert on ``increase(...) > 0`` fires on the very first dead letter.
    """

    def __init__(self, group: str, namespace: str | None = None, topics: tuple[str, ...] = ()) -> None:
        self.group = group
        self.namespace = namespace
        self.counts: dict[tuple[str, str], int] = {
            (topic, reason.value): 0 for topic in topics for reason in DeadLetterReason}

    def record(self, reason: DeadLetterReason, *, msg_id: str, topic: str, attempts: int,
               failure: Failure | None) -> None:
        """Count one message the broker has taken into the DLQ and log the one line that names it."""
        user_topic = unwrap(self.namespace, topic) if self.namespace else topic
        key = (user_topic, reason.value)
        self.counts[key] = self.counts.get(key, 0) + 1
        where = (f"queue {unwrap(self.namespace, failure.mq.topic) if self.namespace else failure.mq.topic}/"
                 f"{failure.mq.broker_name}/{failure.mq.queue_id} offset {failure.offset}"
                 if failure is not None else "queue unknown")
        error = failure.error if failure is not None and failure.error else "none reported"
        logger.error("dead-lettered message {} of {} to {} ({}): {}, attempts {}, last error: {}",
                     msg_id, user_topic, dlq_topic(self.group), reason.value, where, attempts, error)
