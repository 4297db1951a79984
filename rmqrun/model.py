"""Plain data shared by every layer: a message queue and the message a handler sees.

These types carry no behaviour beyond ordering and formatting, so the codec,
the consumer logic, the worker and the embedded broker can all use them
without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import total_ordering
from typing import Any


#: The topics RocketMQ derives from a consumer group: its retry topic and its dead-letter topic
#: (Java's MixAll.RETRY_GROUP_TOPIC_PREFIX / DLQ_GROUP_TOPIC_PREFIX).
RETRY_TOPIC_PREFIX = "%RETRY%"
DLQ_TOPIC_PREFIX = "%DLQ%"


@total_ordering
@dataclass(frozen=True, slots=True)
class MessageQueue:
    """One queue of a topic on one broker.

    Sorting follows the Java client (topic, then broker name, then queue id),
    because allocation strategies sort the queue list before splitting it and
    every member of a group must sort the same way.
    """

    topic: str
    broker_name: str
    queue_id: int

    def _key(self) -> tuple[str, str, int]:
        return (self.topic, self.broker_name, self.queue_id)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, MessageQueue):
            return NotImplemented
        return self._key() < other._key()

    def __str__(self) -> str:
        # The exact text the Java client hashes in AllocateMessageQueueConsistentHash.
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"

    def to_json(self) -> dict[str, Any]:
        """The field names RocketMQ uses for a MessageQueue in JSON bodies."""
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "MessageQueue":
        return cls(str(data["topic"]), str(data["brokerName"]), int(data["queueId"]))


@dataclass(slots=True)
class Message:
    """A consumed message, as a handler receives it.

    ``msg_id`` is the client-visible id: the producer's ``UNIQ_KEY`` when it
    set one, else the broker's offset message id (``offset_msg_id``).
    """

    topic: str
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    msg_id: str = ""
    offset_msg_id: str = ""
    broker_name: str = ""
    queue_id: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    born_timestamp: int = 0
    store_timestamp: int = 0
    born_host: str = ""
    store_host: str = ""
    reconsume_times: int = 0
    flag: int = 0
    sys_flag: int = 0
    body_crc: int = 0
    prepared_transaction_offset: int = 0

    @property
    def tags(self) -> str | None:
        return self.properties.get("TAGS")

    @property
    def keys(self) -> str | None:
        return self.properties.get("KEYS")

    @property
    def key_list(self) -> list[str]:
        """KEYS holds several keys separated by spaces."""
        keys = self.properties.get("KEYS")
        return keys.split(" ") if keys else []

    @property
    def queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)

    def __repr__(self) -> str:
        return (
            f"Message(topic={self.topic!r}, tags={self.tags!r}, keys={self.keys!r}, "
            f"queue={self.broker_name}:{self.queue_id}, offset={self.queue_offset}, "
            f"msg_id={self.msg_id!r}, reconsume_times={self.reconsume_times}, body={len(self.body)} bytes)"
        )
