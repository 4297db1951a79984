"""The sink: each row becomes one message, sent and confirmed before the next.

Columns: ``body`` (binary or string, required), optional ``topic`` (the row's
topic; null or absent: option ``topic``), ``tags``, ``keys``,
``properties`` (map<string,string>) and ``sharding_key``: rows with the same
key go to one queue (the producer's hash selector, as Java's
``SelectMessageQueueByHash``), in the order of the partition: a keyed row is
sent only once the key's previous row is stored. Other sends are pipelined
(up to :data:`WINDOW` in flight), each still confirmed by the broker. A failed send fails the task, naming the topic and the
broker's answer, so Spark retries it: delivery is at least once. Every row of
a task is checked before its first send (:mod:`rmqrun.spark.sink_rows`): a row
that cannot become a message fails the task with nothing of it stored, so
retries of a task with a bad row duplicate nothing. Before the first send, too,
every topic of the task must exist (the name server has a route for it) unless
option ``createTopic`` is true, so a typo in a topic name stores nothing
instead of auto-creating a topic on brokers that allow it.

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

from rmqrun.spark.errors import OptionError, SourceError
from rmqrun.spark.options import WriteOptions
from rmqrun.spark.schema import SINK_OPTIONAL, SINK_REQUIRED
from rmqrun.spark.sink_rows import checked_rows


@dataclass
class SentCount(WriterCommitMessage):
    sent: int


def check_sink_schema(schema: StructType, topic_option: bool = True) -> tuple[str, ...]:
    """The columns to send; unknown or mistyped columns are an error naming them, and so is data
    without a ``topic`` column when option topic is not set (``topic_option`` False)."""
    names = [f.name for f in schema.fields]
    lower = [n.lower() for n in names]
    if "body" not in lower:
        raise OptionError(f"rocketmq sink needs a column body (binary or string); the data has {', '.join(names)}")
    if not topic_option and "topic" not in lower:
        raise OptionError("rocketmq sink: set option topic or give the data a topic column (string; a row whose "
                          "topic is null goes to option topic)")
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


#: sends in flight per task; rows of one sharding key still go one after another
WINDOW = 64


class _Sends:
    """Sends pipelined up to :data:`WINDOW` in flight, except that a row with a sharding key
    waits until the previous row of the same key is stored, so each key keeps its order
    (and one answer per send is still awaited). The first failure is kept and raised."""

    def __init__(self, producer: Any, opts: WriteOptions) -> None:
        self.producer, self.opts = producer, opts
        self.window = asyncio.Semaphore(WINDOW)
        self.last_of_key: dict[str, asyncio.Task[None]] = {}
        self.pending: set[asyncio.Task[None]] = set()
        self.sent = 0
        self.failure: BaseException | None = None
        #: the topic of the send that failed first (for the error)
        self.topic = opts.topic

    async def submit(self, body: bytes, tags: str | None, keys: str | None, props: dict[str, str] | None,
                     key: str | None, topic: str | None = None) -> None:
        await self.window.acquire()
        self.check()
        topic = topic or self.opts.topic
        prev = self.last_of_key.get(key) if key is not None else None
        task = asyncio.create_task(self._one(body, tags, keys, props, key, prev, topic))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)
        if key is not None:
            self.last_of_key[key] = task
            task.add_done_callback(lambda t, k=key: self.last_of_key.pop(k, None)
                                   if self.last_of_key.get(k) is t else None)

    async def _one(self, body: bytes, tags: str | None, keys: str | None, props: dict[str, str] | None,
                   key: str | None, prev: "asyncio.Task[None] | None", topic: str | None = None) -> None:
        try:
            if prev is not None:
                await asyncio.wait([prev])
                if prev.cancelled() or prev.exception() is not None:
                    return  # the key's earlier row failed: this one is not sent out of order
            await self.producer.send(topic or self.opts.topic, body, tags=tags, keys=keys, properties=props,
                                     sharding_key=key)
            self.sent += 1
        except Exception as e:  # noqa: BLE001 - every failure fails the task, with the broker's answer
            if self.failure is None:
                self.failure, self.topic = e, topic or self.opts.topic
        finally:
            self.window.release()

    def check(self) -> None:
        if self.failure is not None:
            e = self.failure
            raise SourceError(f"rocketmq sink: sending to topic {self.topic} via {self.opts.namesrv} failed "
                              f"({self.sent} message(s) of this task stored): {type(e).__name__}: {e}")

    async def drain(self) -> None:
        while self.pending:
            await asyncio.wait(set(self.pending))
        self.check()


async def _check_topics(producer: Any, opts: WriteOptions, topics: set[str]) -> None:
    """Before the first send: every topic of the task must exist (the name server has a route for it),
    unless option createTopic=true lets the broker create it on the first send (autoCreateTopicEnable,
    with the queues of its TBW102 template)."""
    if opts.create_topic:
        return
    from rmqrun.namespace import wrap
    from rmqrun.remoting.errors import TopicNotExistError

    missing = []
    for topic in sorted(topics):
        try:
            await producer.instance.update_route(wrap(opts.namespace, topic))
        except TopicNotExistError:
            missing.append(topic)
        except Exception as e:  # noqa: BLE001 - a silent name server: the same error a send would give
            raise SourceError(f"rocketmq sink: sending to topic {topic} via {opts.namesrv} failed (0 message(s) "
                              f"of this task stored): {type(e).__name__}: {e}") from None
    if missing:
        raise SourceError(f"rocketmq sink: topic(s) {', '.join(missing)} do not exist (name server "
                          f"{opts.namesrv} has no route); create them (mqadmin updateTopic) or set option "
                          f"createTopic=true to let the broker create them; nothing of this task was sent")


async def _send_rows(opts: WriteOptions, rows: Iterator[Any]) -> int:
    from rmqrun.client.producer import Producer

    held = checked_rows(opts.topic, rows)
    try:
        if not held.count:
            return 0
        async with Producer(opts.namesrv, opts.producer_group, send_timeout=opts.send_timeout,
                            namespace=opts.namespace, security=opts.security) as producer:
            await _check_topics(producer, opts, held.topics)
            sends = _Sends(producer, opts)
            try:
                for row in held:
                    await sends.submit(row.body, row.tags, row.keys, row.properties, row.sharding_key, row.topic)
                await sends.drain()
            finally:
                for task in list(sends.pending):
                    task.cancel()
        return sends.sent
    finally:
        held.close()


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
