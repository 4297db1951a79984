"""The data source's planner-side code, called in this process as Spark's Python planner calls it.

Spark runs ``reader()``/``writer()``, the batch reader's planning and the sink's
schema check in Python worker processes that end without saving coverage data
(``test_spark_batch`` / ``test_spark_errors`` go through Spark for the same
paths). Here the same objects are built with Spark's own types against a real
embedded broker, so what they decide is checked directly: the partitions
planned, the rows a partition reads, the columns refused.
"""

from __future__ import annotations

from typing import Any

import pytest

from rmqrun.spark.batch import RangePartition, read_partition
from rmqrun.spark.errors import OptionError
from rmqrun.spark.pulling import read_range
from rmqrun.spark.ranges import QueueRange, open_consumer
from rmqrun.spark.sink import RocketMQWriter, check_sink_schema
from rmqrun.spark.source import RocketMQDataSource
from tests.integration.signals_kit import produce, queue_max_offsets


@pytest.fixture(autouse=True)
def _close_executor_consumers() -> Any:
    """read_partition leaves this process's consumer cached, as a Spark worker keeps it; close it before the
    module's broker stops, so no consumer outlives its broker."""
    from rmqrun.spark import executor_clients

    yield
    executor_clients.close_all()


def test_the_batch_reader_plans_ranges_and_a_partition_reads_exactly_its_range(broker: Any) -> None:
    produce(broker, "PlanIn", 12)
    holding = {q for q, m in queue_max_offsets(broker, "PlanIn").items() if m}
    assert len(holding) >= 2
    source = RocketMQDataSource({"namesrv": broker.namesrv_address, "topic": "PlanIn"})
    assert "body" in source.schema()
    reader = source.reader(None)  # type: ignore[arg-type]
    (packed,) = reader.partitions()     # a small backlog: every queue's range in one task
    assert isinstance(packed, RangePartition) and packed.size == 12
    assert sorted(r.queue_id for r in packed.ranges) == sorted(holding)
    split = RocketMQDataSource({"namesrv": broker.namesrv_address, "topic": "PlanIn",
                                "minPartitions": "1"}).reader(None)  # type: ignore[arg-type]
    assert [len(p.ranges) for p in split.partitions()] == [1] * len(holding), "an explicit split is not packed"
    for parts in ([packed], split.partitions()):
        rows = []
        for part in parts:
            for batch in reader.read(part):
                rows.extend(batch.to_pylist())
        assert sorted(r["body"] for r in rows) == sorted(f"msg-{i}".encode() for i in range(12))
        assert {r["topic"] for r in rows} == {"PlanIn"}
        for q in holding:   # each queue's messages in queue order, one range after the other
            offsets = [r["queue_offset"] for r in rows if r["queue_id"] == q]
            assert offsets == sorted(offsets)


def test_an_empty_topic_plans_one_empty_partition(broker: Any) -> None:
    produce(broker, "PlanEmpty", 1)
    source = RocketMQDataSource({"namesrv": broker.namesrv_address, "topic": "PlanEmpty",
                                 "startingOffsets": "timestamp:9999999999999"})  # after everything
    reader = source.reader(None)  # type: ignore[arg-type]
    (part,) = reader.partitions()
    assert part.size == 0
    assert [b for b in reader.read(part)] == []


def test_a_range_past_the_queue_end_fails_or_is_skipped_by_fail_on_data_loss(broker: Any) -> None:
    produce(broker, "PlanShort", 4)
    from rmqrun.spark.options import ReadOptions
    consumer = open_consumer(broker.namesrv_address, timeout=10)
    try:
        mq = max(consumer.fetch_subscribe_message_queues("PlanShort"), key=consumer.max_offset)
        assert consumer.max_offset(mq) >= 1
        beyond = QueueRange("PlanShort", mq.broker_name, mq.queue_id, 0, 50)
        with pytest.raises(Exception, match=r"before the planned end 50|past the queue's end"):
            list(read_range(consumer, beyond, fail_on_data_loss=True))
        got = list(read_range(consumer, beyond, fail_on_data_loss=False))
        assert [m.queue_offset for m in got] == list(range(len(got))) and len(got) >= 1
    finally:
        consumer.close()
    opts = ReadOptions.parse({"namesrv": broker.namesrv_address, "topic": "PlanShort", "failOnDataLoss": "false"})
    rows = [r for b in read_partition(opts, beyond) for r in b.to_pylist()]
    assert [r["queue_offset"] for r in rows] == [m.queue_offset for m in got]


def test_the_writer_checks_options_and_the_schema_before_anything_is_sent() -> None:
    from pyspark.sql.types import BinaryType, IntegerType, MapType, StringType, StructField, StructType
    good = StructType([StructField("body", BinaryType()), StructField("Tags", StringType()),
                       StructField("properties", MapType(StringType(), StringType()))])
    assert check_sink_schema(good) == ("body", "Tags", "properties")
    writer = RocketMQDataSource({"namesrv": "127.0.0.1:1", "topic": "Out"}).writer(good, False)
    assert isinstance(writer, RocketMQWriter)
    refusals = [
        (StructType([StructField("value", BinaryType())]), "needs a column body (binary or string); the data has value"),
        (StructType([StructField("body", StringType()), StructField("colour", StringType())]),
         "unknown column(s) colour"),
        (StructType([StructField("body", IntegerType())]), "column body must be binary or string, got int"),
        (StructType([StructField("body", BinaryType()), StructField("properties", StringType())]),
         "column properties must be map<string,string>, got string"),
        (StructType([StructField("body", BinaryType()), StructField("keys", BinaryType())]),
         "column keys must be string, got binary"),
    ]
    for schema, words in refusals:
        with pytest.raises(OptionError) as err:
            check_sink_schema(schema)
        assert words in str(err.value)
        with pytest.raises(Exception) as through_source:
            RocketMQDataSource({"namesrv": "127.0.0.1:1", "topic": "Out"}).streamWriter(schema, False)
        assert words in str(through_source.value)


def test_planning_errors_name_the_option(broker: Any) -> None:
    produce(broker, "PlanErr", 4)
    ns = broker.namesrv_address

    def plan(**options: str) -> str:
        with pytest.raises(Exception) as err:
            RocketMQDataSource({"namesrv": ns, **options}).reader(None)  # type: ignore[arg-type]
        return str(err.value)

    assert "topic 'PlanNever' does not exist" in plan(topic="PlanNever")
    assert "names queue(s) that do not exist: PlanErr broker-a:99" in plan(
        topic="PlanErr", startingOffsets='{"PlanErr": {"broker-a:99": 0}}')
    assert "is past the queue's end" in plan(topic="PlanErr", startingOffsets='{"PlanErr": {"broker-a:0": 500}}')
    with pytest.raises(Exception, match="did not answer"):
        RocketMQDataSource({"namesrv": "127.0.0.1:1", "topic": "PlanErr",
                            "pullTimeoutMs": "500"}).reader(None)  # type: ignore[arg-type]
