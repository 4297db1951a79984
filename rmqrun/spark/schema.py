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
SINK_OPTIONAL = ("topic", "tags", "keys", "properties", "sharding_key")


def _ts(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)


def to_row(msg: Message) -> tuple[Any, ...]:
    """One message as a row of :data:`SCHEMA_DDL` (timestamps are UTC-aware datetimes)."""
    return (msg.topic, msg.broker_name, msg.queue_id, msg.queue_offset, msg.msg_id, msg.tags, msg.keys,
            bytes(msg.body), dict(msg.properties), _ts(msg.born_timestamp), _ts(msg.store_timestamp),
            msg.reconsume_times)


ARROW_BATCH_ROWS = 4096


def arrow_schema():  # type: ignore[no-untyped-def]
    """The Arrow schema of :data:`SCHEMA_DDL` exactly as Spark derives it (timestamps in µs, UTC);
    pyarrow is imported only on executors."""
    import pyarrow as pa

    return pa.schema([
        ("topic", pa.string()), ("broker", pa.string()), ("queue_id", pa.int32()), ("queue_offset", pa.int64()),
        ("msg_id", pa.string()), ("tags", pa.string()), ("keys", pa.string()), ("body", pa.binary()),
        ("properties", pa.map_(pa.string(), pa.string())), ("born_timestamp", pa.timestamp("us", tz="UTC")),
        ("store_timestamp", pa.timestamp("us", tz="UTC")), ("reconsume_times", pa.int32()),
    ])


def to_arrow(msgs: list[Message], schema: Any):  # type: ignore[no-untyped-def]
    """Messages as one Arrow record batch: far cheaper for Spark to take than one tuple per row."""
    import pyarrow as pa

    return pa.RecordBatch.from_arrays([
        pa.array([m.topic for m in msgs], pa.string()),
        pa.array([m.broker_name for m in msgs], pa.string()),
        pa.array([m.queue_id for m in msgs], pa.int32()),
        pa.array([m.queue_offset for m in msgs], pa.int64()),
        pa.array([m.msg_id for m in msgs], pa.string()),
        pa.array([m.properties.get("TAGS") for m in msgs], pa.string()),
        pa.array([m.properties.get("KEYS") for m in msgs], pa.string()),
        pa.array([bytes(m.body) for m in msgs], pa.binary()),
        pa.array([list(m.properties.items()) for m in msgs], pa.map_(pa.string(), pa.string())),
        pa.array([m.born_timestamp * 1000 for m in msgs], pa.timestamp("us", tz="UTC")),
        pa.array([m.store_timestamp * 1000 for m in msgs], pa.timestamp("us", tz="UTC")),
        pa.array([m.reconsume_times for m in msgs], pa.int32()),
    ], schema=schema)
