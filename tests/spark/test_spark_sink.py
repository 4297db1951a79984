"""The rocketmq sink: rows become messages that other clients read, sharding keys keep order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rmqrun.client.producer import select_by_sharding_key
from rmqrun.model import MessageQueue
from tests.integration.signals_kit import produce, topic_messages
from tests.peers.cpp import cpp_available, cpp_unavailable_reason, start_consumer

pytestmark = pytest.mark.timeout(300)

SHARDS = 3
PER_SHARD = 8


def test_sink_rows_are_read_by_the_cpp_client_in_sharding_key_order(spark: Any, broker: Any, tmp_path: Path) -> None:
    if not cpp_available():
        pytest.skip(cpp_unavailable_reason())
    topic = "SparkSinkOrder"
    produce(broker, topic, 1)  # create the topic (4 queues) so every row goes to a known route
    rows = [(f"body-{s}-{i}", "TagS", f"key-{s}-{i}", {"idx": str(s * 100 + i), "shard": str(s)}, f"shard-{s}")
            for i in range(PER_SHARD) for s in range(SHARDS)]
    # The shards interleaved in one partition: the sink pipelines sends across keys but
    # must keep each key's rows in partition order.
    rdd = spark.sparkContext.parallelize(rows, 1)
    df = spark.createDataFrame(rdd, "body string, tags string, keys string, properties map<string,string>, "
                                    "sharding_key string")
    df.write.format("rocketmq").option("namesrv", broker.namesrv_address).option("topic", topic) \
        .mode("append").save()

    stored = [m for m in topic_messages(broker, topic) if m.tags == "TagS"]
    assert len(stored) == SHARDS * PER_SHARD
    queues = [MessageQueue(topic, "broker-a", q) for q in range(4)]
    for s in range(SHARDS):
        mine = sorted((m for m in stored if m.properties["shard"] == str(s)), key=lambda m: m.queue_offset)
        assert {m.queue_id for m in mine} == {select_by_sharding_key(queues, f"shard-{s}").queue_id}
        assert [m.body.decode() for m in mine] == [f"body-{s}-{i}" for i in range(PER_SHARD)]
        assert [m.keys for m in mine] == [f"key-{s}-{i}" for i in range(PER_SHARD)]

    with start_consumer(broker.namesrv_address, topic=topic, group="CG_cpp_spark_sink", tags="TagS", orderly=True,
                        expect=SHARDS * PER_SHARD, timeout=90, home=tmp_path / "cpp") as consumer:
        lines = consumer.wait_ok(SHARDS * PER_SHARD, timeout=90)
    ok = [m for m in lines if m["verdict"] == "CONSUME_SUCCESS"]
    by_shard: dict[str, list[int]] = {}
    for m in ok:
        assert m["topic"] == topic and m["tags"] == "TagS"
        assert m["body"] == f"body-{m['properties']['shard']}-{int(m['properties']['idx']) % 100}"
        by_shard.setdefault(m["properties"]["shard"], []).append(int(m["properties"]["idx"]))
    assert {k: sorted(v) for k, v in by_shard.items()} == {
        str(s): [s * 100 + i for i in range(PER_SHARD)] for s in range(SHARDS)}
    for shard, idxs in by_shard.items():
        assert idxs == sorted(idxs), f"shard {shard} read out of order by the C++ client: {idxs}"


def test_stream_from_one_topic_into_another(spark: Any, broker: Any, tmp_path: Path) -> None:
    produce(broker, "SparkPipeIn", 12, tags=["TagA"])
    produce(broker, "SparkPipeOut", 1)
    src = (spark.readStream.format("rocketmq").option("namesrv", broker.namesrv_address)
           .option("topic", "SparkPipeIn").option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "5")
           .load())
    q = (src.selectExpr("body", "concat('copy-', tags) AS tags", "properties", "msg_id AS keys")
         .writeStream.format("rocketmq").option("namesrv", broker.namesrv_address).option("topic", "SparkPipeOut")
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    assert q.awaitTermination(180)
    assert q.exception() is None
    originals = {m.msg_id: m for m in topic_messages(broker, "SparkPipeIn")}
    copies = [m for m in topic_messages(broker, "SparkPipeOut") if m.tags == "copy-TagA"]
    assert sorted(m.keys for m in copies) == sorted(originals)
    for m in copies:
        assert m.body == originals[m.keys].body
        assert m.properties["idx"] == originals[m.keys].properties["idx"]
        # A copy is a new message: its own id, not the original's system properties.
        assert m.msg_id != m.keys and m.properties["UNIQ_KEY"] != originals[m.keys].properties["UNIQ_KEY"]


def test_a_sink_task_with_a_bad_row_stores_nothing_of_its_task(spark: Any, broker: Any) -> None:
    topic = "SparkSinkBadRow"
    produce(broker, topic, 1)  # the topic exists: what is missing afterwards was never sent
    big = "x" * (5 * 1024 * 1024)
    for rows, why in (([("a",), (big,), ("c",)], "row 2 of this task cannot be sent (a body of 5242880 bytes, "
                                                  "over the maximum message size of 4194304 bytes)"),
                      ([("a",), ("c",), (None,)], "row 3 of this task cannot be sent (a null body)")):
        df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 1), "body string").selectExpr(
            "body", "'TagBad' AS tags")
        with pytest.raises(Exception) as info:
            df.write.format("rocketmq").option("namesrv", broker.namesrv_address).option("topic", topic) \
                .mode("append").save()
        assert why in str(info.value) and "nothing of this task was sent" in str(info.value)
        assert [m for m in topic_messages(broker, topic) if m.tags == "TagBad"] == [], "a and c were not stored"


def test_a_sink_row_whose_keys_or_tags_hold_a_property_separator_is_refused_by_name(spark: Any,
                                                                                     broker: Any) -> None:
    """``order-1\\x02DELAY\\x013`` as keys would be sent as keys ``order-1`` plus a delay: refused, nothing stored."""
    topic = "SparkSinkSeparators"
    produce(broker, topic, 1)
    for column, text, why in (("keys", "order-1\x02DELAY\x013", "keys contains the control character \\x02 (U+0002), "
                                                                 "which RocketMQ uses to separate properties"),
                              ("tags", "a\x01b", "tags contains the control character \\x01 (U+0001)")):
        rows = [("fine", "k", "T"), ("bad", text, "T") if column == "keys" else ("bad", "k", text)]
        df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 1), "body string, keys string, tags string")
        with pytest.raises(Exception) as info:
            df.write.format("rocketmq").option("namesrv", broker.namesrv_address).option("topic", topic) \
                .mode("append").save()
        text = str(info.value)
        assert why in text and "row 2 of this task cannot be sent" in text, text[-2000:]
        stored = [m.body for m in topic_messages(broker, topic)]
        assert len(stored) == 1 and b"fine" not in stored and b"bad" not in stored, stored


def test_the_readme_sink_example_saves_without_a_mode_and_overwrite_is_refused(spark: Any, broker: Any,
                                                                               tmp_path: Path) -> None:
    """Spark refused the default mode (ErrorIfExists) of Python data sources; Kafka's sink takes it as append,
    and refuses overwrite, which was silently an append here (issue #33 item 13)."""
    topic = "SparkSinkModes"
    produce(broker, topic, 1)
    df = spark.createDataFrame([("no mode", "k1"), ("no mode 2", "k2")], "body string, keys string")
    df.selectExpr("body", "keys").write.format("rocketmq").option("namesrv", broker.namesrv_address) \
        .option("topic", topic).save()
    df.limit(1).write.format("rocketmq").option("namesrv", broker.namesrv_address).option("topic", topic) \
        .mode("errorifexists").save()
    df.limit(1).write.save(format="rocketmq", namesrv=broker.namesrv_address, topic=topic)
    with pytest.raises(Exception) as info:
        df.write.format("rocketmq").option("namesrv", broker.namesrv_address).option("topic", topic) \
            .mode("overwrite").save()
    assert "save mode Overwrite is not allowed" in str(info.value) and "mode(\"append\")" in str(info.value)
    bodies = sorted(m.body for m in topic_messages(broker, topic))
    assert bodies == [b"msg-0", b"no mode", b"no mode", b"no mode", b"no mode 2"], bodies
    # other formats keep Spark's own default: saving to a parquet path that exists is still an error
    out = str(tmp_path / "modes.parquet")
    df.write.parquet(out)
    with pytest.raises(Exception, match="already exists"):
        df.write.format("parquet").save(out)
