"""The sink: each row becomes one message, sent and confirmed before the next.

Columns: ``body`` (binary or string, required), optional ``tags``, ``keys``,
``properties`` (map<string,string>) and ``sharding_key``: rows with the same
key go to one queue (the producer's hash selector, as Java's
``SelectMessageQueueByHash``), in the order of the partition, since each send
waits for the broker. A failed send fails the task, naming the topic and the
broker's answer, so Spark retries it: delivery is at least once.

``properties`` are user properties: system ones (``UNIQ_KEY``, ``TAGS``,
``KEYS``, ``CLUSTER``, ``MIN_OFFSET``... as a read of the source carries them)
are dropped, so writing rows read from a topic makes new messages, with their
own ids, whose tags and keys come from the ``tags``/``keys`` columns.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Iterator

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, MapType, StringType, StructType

from rmqrun.remoting import message as m
from rmqrun.spark.errors import OptionError, SourceError
from rmqrun.spark.options import WriteOptions
from rmqrun.spark.schema import SINK_OPTIONAL, SINK_REQUIRED


#: properties the client or broker sets itself (Java refuses them as user properties)
SYSTEM_PROPERTIES = frozenset({
    m.PROPERTY_KEYS, m.PROPERTY_TAGS, m.PROPERTY_WAIT_STORE_MSG_OK, m.PROPERTY_DELAY_TIME_LEVEL,
    m.PROPERTY_RETRY_TOPIC, m.PROPERTY_REAL_TOPIC, m.PROPERTY_REAL_QUEUE_ID, m.PROPERTY_TRANSACTION_PREPARED,
    m.PROPERTY_MIN_OFFSET, m.PROPERTY_MAX_OFFSET, m.PROPERTY_ORIGIN_MESSAGE_ID, m.PROPERTY_RECONSUME_TIME,
    m.PROPERTY_MAX_RECONSUME_TIMES, m.PROPERTY_CONSUME_START_TIMESTAMP, m.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    m.PROPERTY_SHARDING_KEY, m.PROPERTY_CLUSTER,
})


@dataclass
class SentCount(WriterCommitMessage):
    sent: int


def check_sink_schema(schema: StructType) -> tuple[str, ...]:
    """The columns to send; unknown or mistyped columns are an error naming them."""
    names = [f.name for f in schema.fields]
    lower = [n.lower() for n in names]
    if "body" not in lower:
        raise OptionError(f"rocketmq sink needs a column body (binary or string); the data has {', '.join(names)}")
    unknown = [n for n, lo in zip(names, lower) if lo not in SINK_REQUIRED + SINK_OPTIONAL]
    if unknown:
        raise OptionError(f"rocketmq sink: unknown column(s) {', '.join(unknown)}; it writes body and optional "
                          f"{', '.join(SINK_OPTIONAL)} (select or drop the others)")
    for f in schema.fields:
        name = f.name.lower()
        ok = (isinstance(f.dataType, (BinaryType, StringType)) if name == "body"
              else isinstance(f.dataType, MapType) if name == "properties"
              else isinstance(f.dataType, StringType))
        if not ok:
            want = {"body": "binary or string", "properties": "map<string,string>"}.get(name, "string")
            raise OptionError(f"rocketmq sink: column {f.name} must be {want}, got {f.dataType.simpleString()}")
    return tuple(names)


async def _send_rows(opts: WriteOptions, rows: Iterator[Any]) -> int:
    from rmqrun.client.producer import Producer

    sent = 0
    async with Producer(opts.namesrv, opts.producer_group, send_timeout=opts.send_timeout) as producer:
        for row in rows:
            d = row.asDict() if hasattr(row, "asDict") else dict(row)
            d = {k.lower(): v for k, v in d.items()}
            body = d.get("body")
            if body is None:
                raise SourceError(f"rocketmq sink: topic {opts.topic}: a row has a null body")
            if isinstance(body, str):
                body = body.encode("utf-8")
            props = {k: v for k, v in (d.get("properties") or {}).items()
                     if k not in SYSTEM_PROPERTIES and v is not None} or None
            key = d.get("sharding_key")
            try:
                await producer.send(opts.topic, bytes(body), tags=d.get("tags"), keys=d.get("keys"),
                                    properties=props, sharding_key=None if key is None else str(key))
            except Exception as e:  # noqa: BLE001 - every failure fails the task, with the broker's answer
                raise SourceError(f"rocketmq sink: sending to topic {opts.topic} via {opts.namesrv} failed "
                                  f"after {sent} message(s) of this task: {type(e).__name__}: {e}") from None
            sent += 1
    return sent


def write_rows(opts: WriteOptions, rows: Iterator[Any]) -> int:
    return asyncio.run(_send_rows(opts, rows))


class RocketMQWriter(DataSourceWriter):
    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return SentCount(write_rows(self.opts, iterator))


class RocketMQStreamWriter(DataSourceStreamWriter):
    """Constructed more than once per micro-batch by Spark: the constructor only keeps the options."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return SentCount(write_rows(self.opts, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # every message was confirmed by the broker in write()

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # sent messages cannot be taken back: the sink is at least once
