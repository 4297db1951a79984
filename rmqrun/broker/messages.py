"""Messages as the broker builds them before they are stored (``MessageExtBrokerInner``).

Every path that writes to the commit log goes through :class:`InnerMessage`:
a producer's send, a consumer's send-back, a delayed message coming due. It
holds the properties as a Java-ordered map *and* the properties string that
will actually be stored, because RocketMQ lets the two differ on purpose (the
stored string of a plain send has no WAIT, while the map keeps it and a later
re-serialisation, e.g. for a delayed message, brings it back).

:func:`read_stored` goes the other way, for send-back and the schedule
service, which re-read a stored record and build a new message from it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

from rmqrun.broker.javamap import JavaPropertyMap
from rmqrun.broker.store.record import parse_header
from rmqrun.remoting.message import decode_message, encode_stored
from rmqrun.topic_names import SCHEDULE_TOPIC
from rmqrun.remoting.message_props import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    tags_code as message_tags_code,
)


#: The consume-queue tags code (Java ``String.hashCode`` of TAGS), cached: a handful
#: of distinct tags account for nearly every message.
tags_code = lru_cache(maxsize=4096)(message_tags_code)


def delay_level_of(props: JavaPropertyMap) -> int:
    """``Message.getDelayTimeLevel``: the DELAY property, 0 when absent or not a number."""
    raw = props.get(PROPERTY_DELAY_TIME_LEVEL)
    if not raw:
        return 0
    try:
        return int(raw)
    except ValueError:
        return 0


@dataclass(slots=True)
class InnerMessage:
    topic: str
    queue_id: int
    body: bytes
    properties: JavaPropertyMap
    properties_string: str
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: str = "127.0.0.1:0"
    store_host: str = "127.0.0.1:10911"
    reconsume_times: int = 0
    #: Overrides the tags code (the schedule topic indexes delivery times, not tags).
    tags_code_override: int | None = None

    def refresh_properties_string(self) -> None:
        self.properties_string = self.properties.to_string()

    @property
    def tags_code(self) -> int:
        if self.tags_code_override is not None:
            return self.tags_code_override
        return tags_code(self.properties.get(PROPERTY_TAGS))

    def to_record(self) -> bytearray:
        """The stored-message record; the store fills in offsets and the store time."""
        return encode_stored(
            topic=self.topic, body=self.body, properties=self.properties_string, queue_id=self.queue_id,
            flag=self.flag, sys_flag=self.sys_flag, born_timestamp=self.born_timestamp,
            born_host=self.born_host, store_timestamp=int(time.time() * 1000), store_host=self.store_host,
            reconsume_times=self.reconsume_times,
        )

    def divert_to_schedule(self, max_level: int, delay_ms_of_level: list[int]) -> int:
        """CommitLog.asyncPutMessage's delay rule: park the message in SCHEDULE_TOPIC_XXXX.

        The real topic and queue go into REAL_TOPIC / REAL_QID, the queue is the
        level - 1, and the tags code becomes the delivery time so the schedule
        service can scan a queue in time order. Returns the (clamped) level.
        """
        level = min(delay_level_of(self.properties), max_level)
        if level != delay_level_of(self.properties):
            self.properties.put(PROPERTY_DELAY_TIME_LEVEL, str(level))
        self.properties.put(PROPERTY_REAL_TOPIC, self.topic)
        self.properties.put(PROPERTY_REAL_QUEUE_ID, str(self.queue_id))
        self.refresh_properties_string()
        self.topic = SCHEDULE_TOPIC
        self.queue_id = level - 1
        self.tags_code_override = int(time.time() * 1000) + delay_ms_of_level[level - 1]
        return level


@dataclass(slots=True)
class StoredMessage:
    """A record read back from the commit log, with its properties in Java map form."""

    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    body: bytes
    properties: JavaPropertyMap
    properties_string: str
    flag: int
    sys_flag: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    offset_msg_id: str
    size: int


def read_stored(record: bytes | memoryview) -> StoredMessage:
    """Decode a whole stored record (body left as stored: still compressed if it was)."""
    header = parse_header(record)
    # Properties that are not UTF-8 are read with replacement characters, as the Java broker's
    # new String(bytes, UTF_8) does: a send-back of such a message (to the DLQ) must not fail.
    raw_props = bytes(record[header.properties_pos:header.properties_pos + header.properties_len]).decode(
        "utf-8", "replace")
    msg, _ = decode_message(record, 0, decompress=False, properties_errors="replace")
    return StoredMessage(
        topic=msg.topic, queue_id=msg.queue_id, queue_offset=msg.queue_offset,
        commit_log_offset=msg.commit_log_offset, body=msg.body, properties=JavaPropertyMap.parse(raw_props),
        properties_string=raw_props, flag=msg.flag, sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp,
        born_host=msg.born_host, store_timestamp=msg.store_timestamp, store_host=msg.store_host,
        reconsume_times=msg.reconsume_times, offset_msg_id=msg.offset_msg_id, size=header.total_size,
    )
