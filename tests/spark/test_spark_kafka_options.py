"""The Kafka connector's remaining options on the rocketmq source and sink (issue #25, item 4):
minOffsetsPerTrigger + maxTriggerDelay, per-queue start/end timestamps, subscribePattern, a per-row
topic column, and a sink that refuses a topic that does not exist unless createTopic=true."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.signals_kit import produce, topic_messages
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(300)


def _batches(query: Any) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]


def _read(spark: Any, broker: Any, **options: str) -> Any:
    r = spark.read.format("rocketmq").option("namesrv", broker.namesrv_address)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_min_offsets_per_trigger_waits_for_enough_rows_or_max_trigger_delay(
        spark: Any, broker: Any, tmp_path: Path) -> None:
    topic = "SparkMinRows"
    produce(broker, topic, 2)
    q = (spark.readStream.format("rocketmq").option("namesrv", broker.namesrv_address).option("topic", topic)
         .option("startingOffsets", "earliest").option("minOffsetsPerTrigger", "5").option("maxTriggerDelay", "15s")
         .load().select("msg_id").writeStream.format("memory").queryName("min_rows")
         .trigger(processingTime="200 milliseconds").start())
    try:
        # 2 < 5 new offsets: the first trigger holds them back (batch 0 reads nothing), a later one
        # reads them once maxTriggerDelay has passed
        eventually(lambda: _batches(q) == [2], what="the 2 waiting rows to be read after maxTriggerDelay",
                   interval=0.1, timeout=120)
        progress = q.recentProgress
        assert progress[0]["numInputRows"] == 0, "the first trigger read 2 < minOffsetsPerTrigger rows"
        data = next(p for p in progress if p["numInputRows"] > 0)
        # the delay counts from the query's first planning, inside trigger 0; trigger starts are stamped
        # a little before their planning, hence 15 s minus a margin
        waited = _seconds(data["timestamp"]) - _seconds(progress[0]["timestamp"])
        assert waited >= 13.0, f"the batch of 2 < minOffsetsPerTrigger came {waited:.1f} s after the first trigger"
        # 6 >= 5 new offsets: admitted as one batch. They are sent as one batch message so that they appear
        # at once: six single sends on a loaded machine could outlast the next 15 s delay, which would then
        # rightly admit the first of them alone.
        _send_batch(broker, topic, [f"m{i}".encode() for i in range(2, 8)])
        eventually(lambda: len(_batches(q)) == 2, what="the batch of 6", interval=0.1, timeout=120)
        assert _batches(q) == [2, 6]
    finally:
        q.stop()
    assert spark.sql("SELECT count(*) AS n FROM min_rows").collect()[0].n == 8


def _send_batch(broker: Any, topic: str, bodies: list[bytes]) -> None:
    """``bodies`` as one SEND_BATCH_MESSAGE to one queue: stored, and seen by a reader, all together."""
    import asyncio

    from rmqrun.client.producer import Producer

    async def main() -> None:
        async with Producer(broker.namesrv_address, "PG_spark_batch") as producer:
            await producer.send_batch(topic, bodies, queue=0)
    asyncio.run(main())


def _seconds(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_starting_and_ending_offsets_by_timestamp_per_queue(spark: Any, broker: Any) -> None:
    topic = "SparkByTime"
    produce(broker, topic, 8)
    time.sleep(0.05)
    produce(broker, topic, 8, start=8)
    rows = _read(spark, broker, topic=topic).select("queue_id", "queue_offset", "store_timestamp",
                                                    "msg_id").collect()
    q0 = sorted((r for r in rows if r.queue_id == 0), key=lambda r: r.queue_offset)
    assert len(q0) >= 3
    cut = q0[len(q0) // 2].store_timestamp
    cut_ms = int(cut.timestamp() * 1000)
    by_time = json.dumps({topic: {"broker-a:0": cut_ms}})
    got = _read(spark, broker, topic=topic, startingOffsetsByTimestamp=by_time).select("msg_id").collect()
    # queue 0 from the first message stored at or after the time; the other queues from startingOffsets (earliest)
    want = {r.msg_id for r in rows if r.queue_id != 0 or r.store_timestamp >= cut}
    assert {r.msg_id for r in got} == want and len(got) == len(want) < len(rows)
    # the same time as an end: queue 0 up to (not including) that message, the others to their end
    got = _read(spark, broker, topic=topic, endingOffsetsByTimestamp=by_time).select("msg_id").collect()
    assert {r.msg_id for r in got} == {r.msg_id for r in rows if r.queue_id != 0 or r.store_timestamp < cut}
    # a time after every message: an error naming the queue, or the queue's end with strategy latest
    future = json.dumps({topic: {"broker-a:1": int(time.time() * 1000) + 3_600_000}})
    with pytest.raises(Exception) as info:
        _read(spark, broker, topic=topic, startingOffsetsByTimestamp=future).collect()
    assert ("option startingOffsetsByTimestamp: SparkByTime broker-a:1 has no message stored at or after"
            in str(info.value))
    got = _read(spark, broker, topic=topic, startingOffsetsByTimestamp=future,
                startingOffsetsByTimestampStrategy="latest").select("queue_id").collect()
    assert len(got) == len([r for r in rows if r.queue_id != 1]) and 1 not in {r.queue_id for r in got}


def test_subscribe_pattern_picks_up_a_topic_created_mid_stream(spark: Any, broker: Any, tmp_path: Path) -> None:
    first = set(produce(broker, "SparkPat1", 5))
    produce(broker, "SparkPatX", 3)      # does not match the pattern
    q = (spark.readStream.format("rocketmq").option("namesrv", broker.namesrv_address)
         .option("subscribePattern", "SparkPat[0-9]+").option("startingOffsets", "earliest").load()
         .select("topic", "msg_id").writeStream.format("memory").queryName("pattern_rows")
         .trigger(processingTime="200 milliseconds").start())
    try:
        eventually(lambda: sum(_batches(q)) >= 5, what="the rows of SparkPat1", interval=0.1, timeout=120)
        second = set(produce(broker, "SparkPat2", 4))   # a new topic, created while the query runs
        eventually(lambda: sum(_batches(q)) >= 9, what="the rows of the new topic SparkPat2", interval=0.1, timeout=120)
        end = json.loads(q.lastProgress["sources"][0]["endOffset"])
    finally:
        q.stop()
    rows = spark.sql("SELECT topic, msg_id FROM pattern_rows").collect()
    assert sorted(r.msg_id for r in rows) == sorted(first | second)
    assert {r.topic for r in rows} == {"SparkPat1", "SparkPat2"}
    assert sorted(end) == ["SparkPat1", "SparkPat2"]      # offsets keyed by topic, the new one included
    assert sum(end["SparkPat2"].values()) == 4


def test_subscribe_pattern_matches_whole_topic_names_only(spark: Any, broker: Any) -> None:
    """As Kafka's: the pattern must match the whole name, so a plain name is not a prefix match."""
    mine = produce(broker, "SparkWhole", 3)
    produce(broker, "SparkWhole_archive", 2)      # starts with the pattern: not a match
    rows = _read(spark, broker, subscribePattern="SparkWhole").select("topic", "msg_id").collect()
    assert {r.topic for r in rows} == {"SparkWhole"}
    assert sorted(r.msg_id for r in rows) == sorted(mine)


def test_sink_topic_column_with_the_option_as_fallback(spark: Any, broker: Any) -> None:
    for topic in ("SparkRowT1", "SparkRowT2", "SparkRowDefault"):
        produce(broker, topic, 1)
    rows = [("SparkRowT1", "one"), ("SparkRowT2", "two"), (None, "default"), ("SparkRowT1", "three")]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 1), "topic string, body string") \
        .selectExpr("topic", "body", "'TagRow' AS tags")
    df.write.format("rocketmq").option("namesrv", broker.namesrv_address).option("topic", "SparkRowDefault") \
        .mode("append").save()

    def bodies(topic: str) -> list[str]:
        return sorted(m.body.decode() for m in topic_messages(broker, topic) if m.tags == "TagRow")

    assert (bodies("SparkRowT1"), bodies("SparkRowT2"), bodies("SparkRowDefault")) == (
        ["one", "three"], ["two"], ["default"])
    # no option topic: a row with a null topic fails its task before anything of it is sent
    bad = spark.createDataFrame(spark.sparkContext.parallelize([("SparkRowT2", "four"), (None, "five")], 1),
                                "topic string, body string").selectExpr("topic", "body", "'TagRow' AS tags")
    with pytest.raises(Exception) as info:
        bad.write.format("rocketmq").option("namesrv", broker.namesrv_address).mode("append").save()
    assert "row 2 of this task cannot be sent (a null topic column and no option topic" in str(info.value)
    assert bodies("SparkRowT2") == ["two"], "row 1 of the failed task was stored"
    # no option topic and no topic column: refused while the query is planned
    with pytest.raises(Exception) as info:
        bad.select("body").write.format("rocketmq").option("namesrv", broker.namesrv_address) \
            .mode("append").save()
    assert "set option topic or give the data a topic column" in str(info.value)


def test_sink_refuses_a_missing_topic_unless_create_topic(spark: Any, broker: Any) -> None:
    produce(broker, "SparkSinkThere", 1)
    df = spark.createDataFrame(spark.sparkContext.parallelize(
        [("SparkSinkThere", "a"), ("SparkSinkNew", "b")], 1), "topic string, body string")
    with pytest.raises(Exception) as info:
        df.write.format("rocketmq").option("namesrv", broker.namesrv_address).mode("append").save()
    assert "rocketmq sink: topic(s) SparkSinkNew do not exist" in str(info.value)
    assert "createTopic=true" in str(info.value)
    assert [m.body for m in topic_messages(broker, "SparkSinkThere")] == [b"msg-0"], "a was stored"
    assert topic_messages(broker, "SparkSinkNew") == [] and broker.broker.topics.get("SparkSinkNew") is None
    df.write.format("rocketmq").option("namesrv", broker.namesrv_address).option("createTopic", "true") \
        .mode("append").save()
    assert [m.body for m in topic_messages(broker, "SparkSinkNew")] == [b"b"]
    assert sorted(m.body for m in topic_messages(broker, "SparkSinkThere")) == [b"a", b"msg-0"]
