"""The batch reader: one Spark partition per queue range, planned when the query is planned."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from pyspark.sql.datasource import DataSourceReader, InputPartition

from rmqrun.spark.executor_clients import consumer_for, discard
from rmqrun.spark.options import ReadOptions
from rmqrun.spark.prefetch import chunks_ahead
from rmqrun.spark.pulling import read_range
from rmqrun.spark.ranges import QueueRange, open_consumer, plan_batch
from rmqrun.spark.schema import ARROW_BATCH_ROWS, arrow_schema, to_arrow


class RangePartition(InputPartition):
    """One queue's ``[start, end)``; picklable (plain values only)."""

    def __init__(self, r: QueueRange) -> None:
        super().__init__(r)
        self.range = r


def read_partition(opts: ReadOptions, r: QueueRange) -> Iterator[Any]:
    """Rows of one range as Arrow record batches (batch and streaming), pulled with this worker
    process's consumer (:mod:`rmqrun.spark.executor_clients`), the next chunk pulled while the last
    one is converted (:mod:`rmqrun.spark.prefetch`). Arrow batches cost Spark far less than a tuple
    per row."""
    schema = arrow_schema()
    consumer = consumer_for(opts)
    try:
        for chunk in chunks_ahead(lambda: read_range(consumer, r, opts.tags, fail_on_data_loss=opts.fail_on_data_loss,
                                                     batch_size=opts.pull_batch_size), ARROW_BATCH_ROWS):
            yield to_arrow(chunk, schema)
    except Exception:
        discard(opts, consumer)     # the next task connects afresh rather than inherit a broken connection
        raise


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
        return [RangePartition(r) for r in self.ranges]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        r: QueueRange = partition.range  # type: ignore[attr-defined]
        if r.size <= 0:
            return iter(())
        return read_partition(self.opts, r)
