"""Batch reads of the rocketmq source: exactly the produced messages, every field, exact ranges."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.signals_kit import produce, queue_max_offsets, topic_messages

pytestmark = pytest.mark.timeout(240)


def _reader(spark: Any, broker: Any, topic: str, **options: str) -> Any:
    r = spark.read.format("rocketmq").option("namesrv", broker.namesrv_address).option("topic", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_batch_read_returns_every_message_with_every_field(spark: Any, broker: Any) -> None:
    ids = produce(broker, "SparkBatch", 24, tags=["TagA", "TagB"], props={"origin": "test"})
    stored = {m.msg_id: m for m in topic_messages(broker, "SparkBatch")}
    assert set(stored) == set(ids)

    df = _reader(spark, broker, "SparkBatch")
    assert df.columns == ["topic", "broker", "queue_id", "queue_offset", "msg_id", "tags", "keys", "body",
                          "properties", "born_timestamp", "store_timestamp", "reconsume_times"]
    assert df.schema["body"].dataType.simpleString() == "binary"
    assert df.schema["properties"].dataType.simpleString() == "map<string,string>"
    assert df.schema["born_timestamp"].dataType.simpleString() == "timestamp"
    rows = df.collect()
    assert sorted(r.msg_id for r in rows) == sorted(ids), "each produced message exactly once"
    for r in rows:
        m = stored[r.msg_id]
        assert (r.topic, r.broker, r.queue_id, r.queue_offset) == ("SparkBatch", "broker-a", m.queue_id,
                                                                  m.queue_offset)
        assert r.tags == m.tags and r.keys == m.keys
        assert r.body == m.body and r.body == f"msg-{m.properties['idx']}".encode()
        assert r.properties == m.properties and r.properties["origin"] == "test"
        assert round(r.born_timestamp.timestamp() * 1000) == m.born_timestamp
        assert round(r.store_timestamp.timestamp() * 1000) == m.store_timestamp
        assert r.reconsume_times == 0


def test_batch_reads_exactly_the_offset_range_and_filters_tags(spark: Any, broker: Any) -> None:
    produce(broker, "SparkRange", 40, tags=["TagA", "TagB"])
    maxes = queue_max_offsets(broker, "SparkRange")
    assert len(maxes) >= 2 and all(v >= 6 for v in maxes.values())
    start = {"SparkRange": {f"broker-a:{q}": 2 for q in maxes}}
    end = {"SparkRange": {f"broker-a:{q}": 6 for q in maxes}}
    df = _reader(spark, broker, "SparkRange", startingOffsets=json.dumps(start), endingOffsets=json.dumps(end))
    got = sorted((r.queue_id, r.queue_offset) for r in df.select("queue_id", "queue_offset").collect())
    assert got == sorted((q, o) for q in maxes for o in range(2, 6))

    # Split into many partitions: the same rows, none twice, none past the end.
    split = _reader(spark, broker, "SparkRange", minPartitions="9", maxRecordsPerPartition="3")
    assert split.rdd.getNumPartitions() >= 9
    got = sorted((r.queue_id, r.queue_offset) for r in split.select("queue_id", "queue_offset").collect())
    assert got == sorted((q, o) for q, m in maxes.items() for o in range(m))

    tagged = _reader(spark, broker, "SparkRange", tags="TagB").select("tags", "body").collect()
    assert len(tagged) == 20 and {r.tags for r in tagged} == {"TagB"}


def test_a_tag_filtered_read_split_inside_a_queue_reads_each_message_once(spark: Any, broker: Any) -> None:
    # One queue (one sharding key) tagged B,B,B,B,A,A,B,A,B, read with tags=TagA in pieces of
    # at most 5 offsets: the broker's tag filter scans past a pull's maxMsgNums, so the
    # first piece's pull is answered offsets beyond its end, which belong to the next piece.
    tags = ["TagB", "TagB", "TagB", "TagB", "TagA", "TagA", "TagB", "TagA", "TagB"]
    produce(broker, "SparkTagSplit", len(tags), tags=tags, sharding_keys=1)
    maxes = {q: m for q, m in queue_max_offsets(broker, "SparkTagSplit").items() if m}
    assert list(maxes.values()) == [9]
    df = _reader(spark, broker, "SparkTagSplit", tags="TagA", maxRecordsPerPartition="5")
    assert df.rdd.getNumPartitions() == 2
    rows = df.select("queue_offset", "tags", "body").collect()
    assert sorted((r.queue_offset, r.tags, r.body) for r in rows) == [
        (4, "TagA", b"msg-4"), (5, "TagA", b"msg-5"), (7, "TagA", b"msg-7")], "each TagA message exactly once"


def test_batch_read_of_an_empty_range_is_empty(spark: Any, broker: Any) -> None:
    produce(broker, "SparkEmpty", 4)
    maxes = queue_max_offsets(broker, "SparkEmpty")
    at_end = {"SparkEmpty": {f"broker-a:{q}": m for q, m in maxes.items()}}
    df = _reader(spark, broker, "SparkEmpty", startingOffsets=json.dumps(at_end))
    assert df.count() == 0


def test_batch_reads_several_topics_and_starts_at_a_timestamp(spark: Any, broker: Any) -> None:
    import time

    early = produce(broker, "SparkTimeA", 6, start=0) + produce(broker, "SparkTimeB", 3, start=100)
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    late = produce(broker, "SparkTimeA", 5, start=10) + produce(broker, "SparkTimeB", 2, start=110)

    both = _reader(spark, broker, "SparkTimeA,SparkTimeB").select("topic", "msg_id").collect()
    assert sorted(r.msg_id for r in both) == sorted(early + late)
    assert {r.topic for r in both} == {"SparkTimeA", "SparkTimeB"}

    since = _reader(spark, broker, "SparkTimeA, SparkTimeB", startingOffsets=f"timestamp:{cut}")
    rows = since.select("msg_id", "store_timestamp").collect()
    assert sorted(r.msg_id for r in rows) == sorted(late)
    assert all(r.store_timestamp.timestamp() * 1000 >= cut for r in rows)
