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
#: a partition's first batch: rows reach the JVM after 8 pulls rather than 128; later batches double up to 4096
FIRST_ARROW_BATCH_ROWS = 256


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
    """Messages as one Arrow record batch: far cheaper for Spark to take than one tuple per row.

    One pass over the messages fills a flat list per column; the properties map is built from flat
    key/value lists and offsets (a list of pairs per row cost more than the rest of the batch together),
    and bodies go in as they were decoded (``bytes`` is not copied again until Arrow packs its buffer).
    """
    from rmqrun.spark.columns import columns_to_arrow

    topics, brokers, qids, offs, ids, tags, keys, bodies, born, stored, recons = ([] for _ in range(11))
    prop_keys: list[str] = []
    prop_values: list[str] = []
    prop_offsets = [0]
    n = 0
    for m in msgs:
        props = m.properties
        topics.append(m.topic)
        brokers.append(m.broker_name)
        qids.append(m.queue_id)
        offs.append(m.queue_offset)
        ids.append(m.msg_id)
        tags.append(props.get("TAGS"))
        keys.append(props.get("KEYS"))
        body = m.body
        bodies.append(body if type(body) is bytes else bytes(body))
        prop_keys.extend(props)
        prop_values.extend(props.values())
        n += len(props)
        prop_offsets.append(n)
        born.append(m.born_timestamp * 1000)
        stored.append(m.store_timestamp * 1000)
        recons.append(m.reconsume_times)
    return columns_to_arrow(schema, topics, brokers, qids, offs, ids, tags, keys, bodies, prop_offsets, prop_keys,
                            prop_values, born, stored, recons)
