"""The rows the ``rocketmq`` source produces and the columns its sink accepts."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from rmqrun.model import Message

# The source's schema, as a DDL string (no pyspark import needed here).
SCHEMA_DDL = (
    "topic STRING, broker STRING, queue_id INT, queue_offset BIGINT, msg_id STRING, tags STRING, "
    "keys STRING, body BINARY, properties MAP<STRING, STRING>, born_timestamp TIMESTAMP, "
    "store_timestamp TIMESTAMP, reconsume_times INT"
)
COLUMNS = ("topic", "broker", "queue_id", "queue_offset", "msg_id", "tags", "keys", "body", "properties",
           "born_timestamp", "store_timestamp", "reconsume_times")

# The sink's columns: body is required; the rest are optional.
SINK_REQUIRED = ("body",)
SINK_OPTIONAL = ("tags", "keys", "properties", "sharding_key")


def _ts(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)


def to_row(msg: Message) -> tuple[Any, ...]:
    """One message as a row of :data:`SCHEMA_DDL` (timestamps are UTC-aware datetimes)."""
    return (msg.topic, msg.broker_name, msg.queue_id, msg.queue_offset, msg.msg_id, msg.tags, msg.keys,
            bytes(msg.body), dict(msg.properties), _ts(msg.born_timestamp), _ts(msg.store_timestamp),
            msg.reconsume_times)
