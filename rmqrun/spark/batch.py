"""The batch reader: Spark partitions of queue ranges, planned when the query is planned.

By default a partition holds one queue's range, and queues with a small range
are packed several to a partition (:func:`~rmqrun.spark.ranges.pack`) so a small
backlog does not pay a task start per queue; ``minPartitions`` or
``maxRecordsPerPartition`` ask for an exact split and turn packing off.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence

from pyspark.sql.datasource import DataSourceReader, InputPartition

from rmqrun.spark.executor_clients import consumer_for, discard
from rmqrun.spark.options import ReadOptions
from rmqrun.spark.columns import ColumnRows
from rmqrun.spark.prefetch import items_ahead
from rmqrun.spark.pulling import read_range_columns
from rmqrun.spark.ranges import QueueRange, open_consumer, pack, plan_batch
from rmqrun.spark.schema import ARROW_BATCH_ROWS, FIRST_ARROW_BATCH_ROWS, arrow_schema


class RangePartition(InputPartition):
    """One or more queue ranges ``[start, end)``, read in order; picklable (plain values only)."""

    def __init__(self, r: QueueRange | Iterable[QueueRange]) -> None:
        ranges = (r,) if isinstance(r, QueueRange) else tuple(r)
        super().__init__(ranges)
        self.ranges = ranges

    @property
    def size(self) -> int:
        return sum(r.size for r in self.ranges)


def read_partition(opts: ReadOptions, r: QueueRange | Sequence[QueueRange]) -> Iterator[Any]:
    """Rows of one range, or of several one after the other, as Arrow record batches (batch and
    streaming), pulled with this worker process's consumer (:mod:`rmqrun.spark.executor_clients`)
    and decoded straight into columns (:mod:`rmqrun.spark.columns`) by a thread that pulls and
    builds the next batches while Spark takes the last one (:mod:`rmqrun.spark.prefetch`), across
    the ranges' boundaries too. Arrow batches cost Spark far less than a tuple per row."""
    ranges = (r,) if isinstance(r, QueueRange) else tuple(r)
    consumer = consumer_for(opts)
    try:
        yield from items_ahead(lambda: arrow_batches(consumer, opts, ranges))
    except Exception:
        discard(opts, consumer)     # the next task connects afresh rather than inherit a broken connection
        raise


def arrow_batches(consumer: Any, opts: ReadOptions, ranges: Sequence[QueueRange]) -> Iterator[Any]:
    """The ranges' rows in Arrow batches: the first of about :data:`FIRST_ARROW_BATCH_ROWS` rows (the
    JVM gets rows after a few pulls), each next one twice the last, up to :data:`ARROW_BATCH_ROWS`;
    a batch ends at the pull that fills it, so it may hold up to one pull's rows more."""
    schema = arrow_schema()
    size = FIRST_ARROW_BATCH_ROWS
    rows = ColumnRows(consumer.namespace)
    for one in ranges:
        for _ in read_range_columns(consumer, one, lambda: rows, opts.tags, fail_on_data_loss=opts.fail_on_data_loss,
                                    batch_size=opts.pull_batch_size):
            if rows.rows >= size:
                yield rows.batch(schema)
                rows = ColumnRows(consumer.namespace)
                size = min(size * 2, ARROW_BATCH_ROWS)
    if rows.rows:
        yield rows.batch(schema)


class RocketMQBatchReader(DataSourceReader):
    """Resolves ``startingOffsets``/``endingOffsets`` on the brokers once, in the planner, so every
    error (topic, name server, offsets) surfaces while the query is planned, and every
    partition reads exactly the range planned here."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        consumer = open_consumer(opts.namesrv, group=opts.group, timeout=opts.pull_timeout, security=opts.security,
                                 namespace=opts.namespace)
        try:
            self.ranges = plan_batch(consumer, opts.topics, opts.starting, opts.ending,
                                     min_partitions=opts.min_partitions,
                                     max_records=opts.max_records_per_partition, pattern=opts.pattern)
        finally:
            consumer.close()

    def partitions(self) -> Sequence[InputPartition]:
        if not self.ranges:
            # Spark needs at least one partition; an empty range reads nothing.
            return [RangePartition(QueueRange(self.opts.topics[0] if self.opts.topics else "", "", 0, 0, 0))]
        if self.opts.min_partitions is None and self.opts.max_records_per_partition is None:
            return [RangePartition(group) for group in pack(self.ranges)]
        return [RangePartition(r) for r in self.ranges]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        ranges: tuple[QueueRange, ...] = partition.ranges  # type: ignore[attr-defined]
        if sum(r.size for r in ranges) <= 0:
            return iter(())
        return read_partition(self.opts, ranges)
