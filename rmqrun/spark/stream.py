"""The streaming reader: offsets are per-queue JSON maps, bounded per trigger, mirrored to a group.

Offsets (``checkpoint/offsets/N``) are :func:`rmqrun.spark.offsets.encode`
maps, ``{"topic": {"broker:queueId": next_offset}}`` with sorted keys.

``maxOffsetsPerTrigger`` becomes the default read limit (``ReadMaxRows``), and
each trigger's offsets are shared among the queues in proportion to their
backlog (like the Kafka source's ``rateLimit``). With
``trigger(availableNow=True)`` the brokers' max offsets are taken once
(``prepareForTriggerAvailableNow``) and the query reads up to them in bounded
batches, then ends.

``minOffsetsPerTrigger`` (the Kafka source's option) is applied here, not as a
Spark read limit (PySpark 4.3 passes one limit, and has no composite of a minimum
and a maximum): a trigger that finds fewer new offsets answers ``start``, so
Spark runs no batch, until ``maxTriggerDelay`` has passed since the last batch
was admitted (counted from the query's first planning). With
``subscribePattern`` every planning lists the name server's topics again, so a
topic created meanwhile joins the offsets (from offset 0, its start).

Group commits (option ``group``): Spark calls ``commit(end)`` for a batch only
while it plans the next one and never for the last batch of a run, so the group
is moved (a) in ``commit(end)``, and (b) to ``start`` in every
``latestOffset(start, ...)``: ``start`` is the end of the last batch Spark
finished, so the group follows every finished batch within one trigger, and
after a restart the first planning commits what the checkpoint says. From its
first commit until the query stops, the planner's consumer heartbeats the group
as Java's lite pull consumer does, so ``mqadmin consumerProgress``, the
Dashboard and ``rmqrun status`` list it (``%RETRY%<group>`` exists). What lags:
a batch that finished just before the query stopped is committed only at the
next start from the same checkpoint (an ``availableNow`` run commits its last
batch before it ends, since it plans once more to see there is nothing left).

Progress: ``reportLatestOffset`` answers the brokers' max offsets as of the last
planning (before any read limit or ``availableNow`` cap), in the offsets' own
form, so ``query.lastProgress["sources"][i]["latestOffset"]`` shows how far the
queues reach next to ``endOffset``; :mod:`rmqrun.spark.lag` turns the two into
the Kafka source's ``min/max/avgOffsetsBehindLatest``.
"""

from __future__ import annotations

import time
from typing import Any, Iterator, Sequence

from loguru import logger
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from rmqrun.model import MessageQueue
from rmqrun.spark.batch import RangePartition, read_partition
from rmqrun.spark.errors import SourceError, plainly
from rmqrun.spark.offsets import decode, encode
from rmqrun.spark.options import ReadOptions
from rmqrun.spark.ranges import open_consumer, plan_ranges, resolve, share_limit, source_queues

# Consumers of the planner process, which lives as long as the query: never an
# attribute of the reader, since the reader is pickled to executors.
_PLANNER_CONSUMERS: dict[tuple[Any, ...], Any] = {}


def _planner_key(opts: ReadOptions) -> tuple[Any, ...]:
    # (name server, group, timeout), plus the namespace and the security when there are any
    key: tuple[Any, ...] = (opts.namesrv, opts.group or "", opts.pull_timeout)
    if opts.namespace:
        key += (opts.namespace,)
    if opts.security is not None:  # another account or TLS setting is another connection
        key += (opts.security,)
    return key


def _planner_consumer(opts: ReadOptions) -> Any:
    key = _planner_key(opts)
    consumer = _PLANNER_CONSUMERS.get(key)
    if consumer is None:
        consumer = open_consumer(opts.namesrv, group=opts.group, timeout=opts.pull_timeout,
                                 namespace=opts.namespace, security=opts.security)
        _PLANNER_CONSUMERS[key] = consumer
    return consumer


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._cap: dict[MessageQueue, int] | None = None
        self._committed: dict[MessageQueue, int] = {}
        #: the brokers' max offsets seen by the last planning (what reportLatestOffset answers)
        self._seen_latest: dict[MessageQueue, int] | None = None
        #: when the last batch was admitted (minOffsetsPerTrigger / maxTriggerDelay); None: not yet planned
        self._last_trigger: float | None = None

    # --- planning (one long-lived planner process per query)
    @plainly
    def initialOffset(self) -> dict:
        consumer = _planner_consumer(self.opts)
        queues = source_queues(consumer, self.opts.topics, self.opts.pattern)
        self._last_trigger = time.time()
        return encode(resolve(consumer, queues, self.opts.starting, "startingOffsets"))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def _latest(self) -> dict[MessageQueue, int]:
        consumer = _planner_consumer(self.opts)
        latest = {mq: consumer.max_offset(mq) for mq in source_queues(consumer, self.opts.topics, self.opts.pattern)}
        self._seen_latest = latest
        return latest

    @plainly
    def reportLatestOffset(self) -> dict | None:
        """The latest offsets for the query's progress (Spark asks after planning a trigger)."""
        latest = self._seen_latest if self._seen_latest is not None else self._latest()
        return encode(latest)

    @plainly
    def prepareForTriggerAvailableNow(self) -> None:
        self._cap = self._latest()

    @plainly
    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = decode(start)
        self._commit_group(begin)
        latest = self._latest()
        end: dict[MessageQueue, int] = {}
        begin = {**begin, **self._went_back(begin, latest)}   # where those queues are read from again
        for mq, off in latest.items():
            first = begin.get(mq, 0)
            if self._cap is not None:
                off = min(off, self._cap.get(mq, first))
            end[mq] = max(first, off)
        for mq, off in begin.items():      # a queue gone from the route keeps its offset
            end.setdefault(mq, off)
        if self._delay_batch(begin, end):
            return encode(decode(start))   # Spark's start, unchanged: no batch this trigger
        max_rows = getattr(limit, "max_rows", None)
        if isinstance(limit, ReadMaxRows) and max_rows:
            end = share_limit(begin, end, int(max_rows))
        return encode(end)

    def _went_back(self, begin: dict[MessageQueue, int], latest: dict[MessageQueue, int]) -> dict[MessageQueue, int]:
        """Queues whose max offset is below the checkpointed one (the topic was deleted and created again, or a
        broker lost data), mapped to the offset they are read from again: their min offset, everything they
        hold now. With failOnDataLoss (the default) the query fails instead, naming them.

        As the Kafka source does with failOnDataLoss=false, the lost range (the queue's max offset up to the
        checkpointed one) is dropped with a warning naming it, and reading goes on with what the queue now
        holds, instead of waiting, while every new message is skipped, until the queue passes the old offset.
        The batch planned then ends below its start; :meth:`partitions` reads such a queue from its min offset.
        """
        shrunk = {mq: (begin[mq], off) for mq, off in latest.items() if mq in begin and off < begin[mq]}
        if not shrunk:
            return {}
        detail = "; ".join(f"{mq.topic} {mq.broker_name}:{mq.queue_id} max offset {top} < checkpointed {was}"
                           for mq, (was, top) in sorted(shrunk.items()))
        text = f"rocketmq source: queue(s) went back past the query's offsets (topic recreated, or broker data " \
               f"lost?): {detail}"
        if self.opts.fail_on_data_loss:
            raise SourceError(text + " (set option failOnDataLoss=false to skip the lost offsets and read what the "
                              "queues hold now)")
        consumer = _planner_consumer(self.opts)
        again: dict[MessageQueue, int] = {}
        for mq, (was, top) in sorted(shrunk.items()):
            again[mq] = min(consumer.min_offset(mq), top)
            logger.warning("rocketmq source: {} {}:{} went back from offset {} to max offset {} (failOnDataLoss="
                           "false): offsets {}..{} are lost and skipped; reading the queue again from its min "
                           "offset {}", mq.topic, mq.broker_name, mq.queue_id, was, top, top, was - 1, again[mq])
        return again

    def _delay_batch(self, begin: dict[MessageQueue, int], end: dict[MessageQueue, int]) -> bool:
        """minOffsetsPerTrigger: wait (answer ``start``) while fewer new offsets exist, unless
        maxTriggerDelay passed since the last batch was admitted; never under availableNow, whose
        query ends at the first trigger that finds nothing to read."""
        wanted = self.opts.min_offsets_per_trigger
        if not wanted or self._cap is not None:
            return False
        now = time.time()
        if self._last_trigger is None:
            self._last_trigger = now     # a restart's first planning: the delay counts from here
        new = sum(max(0, off - begin.get(mq, 0)) for mq, off in end.items())
        if new == 0:
            return False                 # nothing to read: no batch either way
        if new < wanted and now - self._last_trigger < self.opts.max_trigger_delay:
            return True
        self._last_trigger = now
        return False

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, until = decode(start), decode(end)
        back = [mq for mq, off in until.items() if off < begin.get(mq, 0)]
        if back:  # a queue that went back (latestOffset, failOnDataLoss=false): read what it holds, up to end
            consumer = _planner_consumer(self.opts)
            begin.update({mq: min(consumer.min_offset(mq), until[mq]) for mq in back})
        ranges = plan_ranges(begin, until, max_records=self.opts.max_records_per_partition)
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        return read_partition(self.opts, partition.ranges)  # type: ignore[attr-defined]

    def commit(self, end: dict) -> None:
        self._commit_group(decode(end))

    def stop(self) -> None:
        """The query ended: close its planner consumer, which leaves the group it heartbeated since its first
        commit (:mod:`rmqrun.pull.registration`), so the group shows online only while the query runs."""
        consumer = _PLANNER_CONSUMERS.pop(_planner_key(self.opts), None)
        if consumer is not None:
            try:
                consumer.close()
            except Exception as e:  # noqa: BLE001 - the query is over either way
                logger.warning("rocketmq source: closing the planner's consumer failed: {}", e)

    def _commit_group(self, offsets: dict[MessageQueue, int]) -> None:
        """Mirror finished offsets to the group on the broker; a failure is logged and retried next time."""
        if not self.opts.group:
            return
        changed = {mq: off for mq, off in offsets.items() if self._committed.get(mq) != off}
        if not changed:
            return
        consumer = _planner_consumer(self.opts)
        try:
            for mq, off in changed.items():
                consumer.update_consume_offset(mq, off)
            consumer.persist_consume_offsets()
        except Exception as e:  # noqa: BLE001 - the query goes on; the next planning tries again
            logger.warning("rocketmq source: committing offsets of group {} failed: {}", self.opts.group, e)
            return
        self._committed.update(changed)
