"""The ``rocketmq`` source, sink and ``rmqrun spark`` under a namespace (option / flag ``namespace``).

Messages are stored in ``ns%topic`` (the broker is asked); the rows, the handler
and the output name the plain topic; offsets go to ``ns%group``; failed messages
of the runner are republished to ``%RETRY%ns%group`` with the wrapped topic as
their RETRY_TOPIC, as the Java client's send-back would name them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_kit import child_env, run_cli
from tests.integration.signals_kit import committed, produce, topic_messages

pytestmark = pytest.mark.timeout(240)
NS = "MQ_INST_spark"


def test_batch_source_reads_the_wrapped_topic_and_shows_the_plain_one(spark: Any, broker: Any) -> None:
    ids = produce(broker, f"{NS}%SparkNsIn", 12)
    df = (spark.read.format("rocketmq").option("namesrv", broker.namesrv_address).option("topic", "SparkNsIn")
          .option("namespace", NS).load())
    rows = df.select("topic", "msg_id", "queue_id").collect()
    assert sorted(r.msg_id for r in rows) == sorted(ids)
    assert {r.topic for r in rows} == {"SparkNsIn"}
    # offsets by the plain topic's name
    start = {"SparkNsIn": {f"broker-a:{q}": 1 for q in {r.queue_id for r in rows}}}
    later = (spark.read.format("rocketmq").option("namesrv", broker.namesrv_address).option("topic", "SparkNsIn")
             .option("namespace", NS).option("startingOffsets", json.dumps(start)).load())
    assert later.count() == 12 - len({r.queue_id for r in rows})


def test_sink_writes_into_the_wrapped_topic(spark: Any, broker: Any) -> None:
    df = spark.createDataFrame([(f"ns-{i}",) for i in range(5)], "body string")
    (df.write.format("rocketmq").option("namesrv", broker.namesrv_address).option("topic", "SparkNsOut")
     .option("namespace", NS).option("createTopic", "true").mode("append").save())
    stored = topic_messages(broker, f"{NS}%SparkNsOut")
    assert sorted(m.body for m in stored) == [f"ns-{i}".encode() for i in range(5)]
    # the topic now exists as NS%SparkNsOut: the sink's existence check looks it up under the namespace
    (df.limit(1).write.format("rocketmq").option("namesrv", broker.namesrv_address).option("topic", "SparkNsOut")
     .option("namespace", NS).mode("append").save())
    stored = topic_messages(broker, f"{NS}%SparkNsOut")
    assert len(stored) == 6
    assert {m.properties.get("INSTANCE_ID") for m in stored} == {NS}
    assert topic_messages(broker, "SparkNsOut") == []


def test_a_bad_namespace_option_is_refused_while_planning(spark: Any, broker: Any) -> None:
    with pytest.raises(Exception, match="option namespace 'a%b' is invalid"):
        (spark.read.format("rocketmq").option("namesrv", broker.namesrv_address).option("topic", "T")
         .option("namespace", "a%b").load().collect())


def test_runner_handles_plain_names_and_retries_and_commits_under_the_namespace(broker: Any, tmp_path: Path) -> None:
    shutil.copy(Path(__file__).with_name("ns_handler.py"), tmp_path / "ns_handler.py")
    (tmp_path / "rec").mkdir()
    produce(broker, f"{NS}%SparkNsRun", 20)
    res = run_cli(["spark", "ns_handler:handle", "--namesrv", broker.namesrv_address, "--topic", "SparkNsRun",
                   "--namespace", NS, "--group", "GSparkNs", "--master", "local[2]", "--conf",
                   "spark.ui.enabled=false"], cwd=tmp_path, timeout=200,
                  env=child_env(RMQRUN_HANDLER_RECORD_DIR=str(tmp_path / "rec"), RMQRUN_HANDLER_FAIL="msg-3,msg-11"))
    assert res.returncode == 0, res.stderr[-3000:]
    seen = [line.split() for f in (tmp_path / "rec").glob("ns-*") for line in f.read_text().splitlines()]
    assert len(seen) == 20 and {topic for topic, _ in seen} == {"SparkNsRun"}
    assert "SparkNsRun handled 20 messages" in res.stdout and NS not in res.stdout

    retried = topic_messages(broker, f"%RETRY%{NS}%GSparkNs")
    assert sorted(m.body for m in retried) == [b"msg-11", b"msg-3"]
    assert {m.properties.get("RETRY_TOPIC") for m in retried} == {f"{NS}%SparkNsRun"}
    assert topic_messages(broker, "%RETRY%GSparkNs") == []
    assert sum(committed(broker, f"{NS}%GSparkNs", f"{NS}%SparkNsRun").values()) == 20


def test_stream_reads_the_wrapped_topic_and_commits_to_the_wrapped_group(spark: Any, broker: Any,
                                                                         tmp_path: Path) -> None:
    from tests.integration.signals_kit import queue_max_offsets

    ids = produce(broker, f"{NS}%SparkNsStream", 10)
    q = (spark.readStream.format("rocketmq").option("namesrv", broker.namesrv_address)
         .option("topic", "SparkNsStream").option("namespace", NS).option("startingOffsets", "earliest")
         .option("group", "CGSparkNs").load()
         .select("topic", "msg_id").writeStream.format("parquet").option("path", str(tmp_path / "out"))
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    assert q.awaitTermination(180), "availableNow query did not end"
    assert q.exception() is None
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(r.msg_id for r in rows) == sorted(ids) and {r.topic for r in rows} == {"SparkNsStream"}
    # the offsets in the checkpoint name the plain topic; the group's offsets are stored under the namespace
    assert committed(broker, f"{NS}%CGSparkNs", f"{NS}%SparkNsStream") == \
        queue_max_offsets(broker, f"{NS}%SparkNsStream")
    stored = broker.broker.store.consumer_offsets
    assert stored.offsets("CGSparkNs", f"{NS}%SparkNsStream") == {}
    assert stored.offsets("CGSparkNs", "SparkNsStream") == {}
