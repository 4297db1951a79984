"""The batch reader: one Spark partition per queue range, planned when the query is planned."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from pyspark.sql.datasource import DataSourceReader, InputPartition

from rmqrun.spark.options import ReadOptions
from rmqrun.spark.pulling import read_range
from rmqrun.spark.ranges import QueueRange, open_consumer, plan_batch
from rmqrun.spark.schema import to_row


class RangePartition(InputPartition):
    """One queue's ``[start, end)``; picklable (plain values only)."""

    def __init__(self, r: QueueRange) -> None:
        super().__init__(r)
        self.range = r


def read_partition(opts: ReadOptions, r: QueueRange) -> Iterator[tuple[Any, ...]]:
    """Rows of one range, pulled with a consumer of this executor process (batch and streaming)."""
    consumer = open_consumer(opts.namesrv, timeout=opts.pull_timeout)
    try:
        for msg in read_range(consumer, r, opts.tags, fail_on_data_loss=opts.fail_on_data_loss,
                              batch_size=opts.pull_batch_size):
            yield to_row(msg)
    finally:
        consumer.close()


class RocketMQBatchReader(DataSourceReader):
    """Resolves ``startingOffsets``/``endingOffsets`` on the brokers once, in the planner, so every
    error (topic, name server, offsets) surfaces while the query is planned, and every
    partition reads exactly the range planned here."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        consumer = open_consumer(opts.namesrv, timeout=opts.pull_timeout)
        try:
            self.ranges = plan_batch(consumer, opts.topics, opts.starting, opts.ending,
                                     min_partitions=opts.min_partitions,
                                     max_records=opts.max_records_per_partition)
        finally:
            consumer.close()

    def partitions(self) -> Sequence[InputPartition]:
        if not self.ranges:
            # Spark needs at least one partition; an empty range reads nothing.
            return [RangePartition(QueueRange(self.opts.topics[0], "", 0, 0, 0))]
        return [RangePartition(r) for r in self.ranges]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        r: QueueRange = partition.range  # type: ignore[attr-defined]
        if r.size <= 0:
            return iter(())
        return read_partition(self.opts, r)
