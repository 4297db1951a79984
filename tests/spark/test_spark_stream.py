"""Streaming reads of the rocketmq source: bounded triggers, availableNow, restart from a checkpoint, group commits."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.signals_kit import committed, produce, queue_max_offsets
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(300)


def _stream(spark: Any, broker: Any, topic: str, **options: str) -> Any:
    r = spark.readStream.format("rocketmq").option("namesrv", broker.namesrv_address).option("topic", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _to_files(df: Any, out: Path, checkpoint: Path) -> Any:
    return (df.select("msg_id", "queue_id", "queue_offset").writeStream.format("parquet")
            .option("path", str(out)).option("checkpointLocation", str(checkpoint)))


def _data_batches(query: Any) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]


def _as_queue_map(end_offset: str, topic: str) -> dict[int, int]:
    return {int(k.split(":")[1]): v for k, v in json.loads(end_offset)[topic].items()}


def test_available_now_reads_the_backlog_in_bounded_batches_and_commits_the_group(
        spark: Any, broker: Any, tmp_path: Path) -> None:
    ids = produce(broker, "SparkNow", 30)
    q = (_to_files(_stream(spark, broker, "SparkNow", startingOffsets="earliest", maxOffsetsPerTrigger="7",
                           group="CG_spark_now"), tmp_path / "out", tmp_path / "cp")
         .trigger(availableNow=True).start())
    assert q.awaitTermination(180), "availableNow query did not end"
    assert q.exception() is None
    sizes = _data_batches(q)
    assert sizes == [7, 7, 7, 7, 2], f"batches not bounded by maxOffsetsPerTrigger: {sizes}"
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(r.msg_id for r in rows) == sorted(ids)
    # The last batch was committed to the group before the query ended.
    assert committed(broker, "CG_spark_now", "SparkNow") == queue_max_offsets(broker, "SparkNow")
    # The driver heartbeated the group while the query ran, so the broker created the retry topic that
    # mqadmin consumerProgress and the Dashboard find groups by; once the query stopped it left the group.
    assert broker.broker.topics.get("%RETRY%CG_spark_now") is not None
    eventually(lambda: not broker.broker.consumers.client_ids("CG_spark_now"),
               what="the driver to leave the group", interval=0.1, timeout=30)


def test_available_now_ends_at_the_offsets_of_its_start_while_producers_write(
        spark: Any, broker: Any, tmp_path: Path) -> None:
    """availableNow reads what existed when the query started, in bounded batches, and ends: messages
    written meanwhile are left to the next run (read past its start, a busy topic's query might never end)."""
    topic = "SparkNowBusy"
    ids = produce(broker, topic, 24)
    q = (_to_files(_stream(spark, broker, topic, startingOffsets="earliest", maxOffsetsPerTrigger="2"),
                   tmp_path / "out", tmp_path / "cp").trigger(availableNow=True).start())
    eventually(lambda: bool(_data_batches(q)) or not q.isActive, what="the first batch", interval=0.1, timeout=120)
    extra = 0
    while q.isActive and extra < 100:         # producers go on writing while the query runs
        produce(broker, topic, 1, start=24 + extra)
        extra += 1
    assert q.awaitTermination(180), "availableNow query did not end"
    assert q.exception() is None
    assert extra > 0, "the query ended before anything was written during it"
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(r.msg_id for r in rows) == sorted(ids), f"{len(rows)} rows for the {len(ids)} messages at start"


def test_restart_from_checkpoint_delivers_each_message_once_and_the_group_follows(
        spark: Any, broker: Any, tmp_path: Path) -> None:
    topic, group = "SparkRestart", "CG_spark_restart"
    ids = produce(broker, topic, 40)
    out, cp = tmp_path / "out", tmp_path / "cp"
    q = (_to_files(_stream(spark, broker, topic, startingOffsets="earliest", maxOffsetsPerTrigger="8",
                           group=group), out, cp)
         .trigger(processingTime="200 milliseconds").start())
    try:
        eventually(lambda: len(_data_batches(q)) >= 2, what="two batches with data", interval=0.1, timeout=120)
        # The group never runs ahead of what Spark finished, and catches up with it.
        for _ in range(3):
            on_broker = committed(broker, group, topic)
            finished = [p for p in q.recentProgress if p["numInputRows"] > 0]
            done = _as_queue_map(finished[-1]["sources"][0]["endOffset"], topic)
            assert all(on_broker.get(qid, -1) <= off for qid, off in done.items()), (on_broker, done)
            time.sleep(0.3)
        assert q.exception() is None
    finally:
        q.stop()
    first_run = sum(_data_batches(q))
    assert 16 <= first_run and all(n <= 8 for n in _data_batches(q))

    ids += produce(broker, topic, 10, start=40)
    q2 = (_to_files(_stream(spark, broker, topic, startingOffsets="earliest", maxOffsetsPerTrigger="8",
                            group=group), out, cp)
          .trigger(availableNow=True).start())
    assert q2.awaitTermination(180)
    assert q2.exception() is None
    assert all(n <= 8 for n in _data_batches(q2))
    rows = spark.read.parquet(str(out)).collect()
    got = sorted(r.msg_id for r in rows)
    assert got == sorted(ids), f"{len(got)} rows for {len(ids)} messages: lost or duplicated"
    assert committed(broker, group, topic) == queue_max_offsets(broker, topic)


def test_processing_time_query_commits_each_finished_batch_to_the_group(
        spark: Any, broker: Any, tmp_path: Path) -> None:
    topic, group = "SparkFollow", "CG_spark_follow"
    produce(broker, topic, 12)
    q = (_to_files(_stream(spark, broker, topic, startingOffsets="earliest", group=group),
                   tmp_path / "out", tmp_path / "cp")
         .trigger(processingTime="200 milliseconds").start())
    try:
        eventually(lambda: sum(_data_batches(q)) == 12, what="the first 12 messages", interval=0.1, timeout=120)
        # The group reaches the batch's end at the next trigger, without the query stopping.
        eventually(lambda: committed(broker, group, topic) == queue_max_offsets(broker, topic),
                   what="the group's offsets to reach the finished batch", interval=0.1, timeout=60)
        produce(broker, topic, 6, start=12)
        eventually(lambda: sum(_data_batches(q)) == 18, what="6 more messages", interval=0.1, timeout=120)
        eventually(lambda: committed(broker, group, topic) == queue_max_offsets(broker, topic),
                   what="the group's offsets to follow the second batch", interval=0.1, timeout=60)
        assert q.exception() is None
    finally:
        q.stop()


def test_stream_starts_at_latest_by_default_and_filters_tags(spark: Any, broker: Any, tmp_path: Path) -> None:
    topic = "SparkLatest"
    produce(broker, topic, 8, tags=["TagA", "TagB"])          # before the query: not read
    q = (_to_files(_stream(spark, broker, topic, tags="TagB"), tmp_path / "out", tmp_path / "cp")
         .trigger(processingTime="200 milliseconds").start())
    try:
        eventually(lambda: q.lastProgress is not None,
                   what="the first trigger (starting offsets resolved)", interval=0.1, timeout=120)
        new = produce(broker, topic, 6, tags=["TagA", "TagB"], start=8)
        wanted = sorted(new[i] for i in range(6) if (8 + i) % 2 == 1)   # TagB ones
        eventually(lambda: sum(_data_batches(q)) >= 3, what="the three new TagB messages", interval=0.1, timeout=120)
        assert q.exception() is None
    finally:
        q.stop()
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(r.msg_id for r in rows) == wanted


def test_progress_shows_the_latest_offsets_and_offsets_behind_that_reach_zero(
        spark: Any, broker: Any, tmp_path: Path) -> None:
    from rmqrun.spark.lag import AVG, MAX, MIN, listen, offsets_behind

    produce(broker, "SparkLag", 20)
    seen = listen(spark)
    q = (_to_files(_stream(spark, broker, "SparkLag", startingOffsets="earliest", maxOffsetsPerTrigger="8"),
                   tmp_path / "out", tmp_path / "cp").trigger(availableNow=True).start())
    assert q.awaitTermination(180) and q.exception() is None
    ends = queue_max_offsets(broker, "SparkLag")
    data = [p for p in q.recentProgress if p["numInputRows"] > 0]
    assert [p["numInputRows"] for p in data] == [8, 8, 4]
    for p in data:
        source = p["sources"][0]
        assert source["latestOffset"] is not None, "the source reports its latest offsets"
        assert _as_queue_map(source["latestOffset"], "SparkLag") == ends
    lags = [offsets_behind(p) for p in data]
    assert lags[0] is not None and int(lags[0][MAX]) > 0 and float(lags[0][AVG]) == 12 / len(ends), lags
    assert lags[-1] == {MIN: "0", MAX: "0", AVG: "0.0"}, "caught up: every queue 0 behind"
    eventually(lambda: seen.get(str(q.id)) == lags[-1], what="the listener's last metrics", interval=0.1, timeout=30)


def test_fail_on_data_loss_false_reads_a_recreated_topic_from_what_its_queues_hold(
        spark: Any, broker: Any, tmp_path: Path) -> None:
    """After the topic was deleted and created again, its queues end below the checkpointed offsets: the query
    skipped every new message until each queue passed them (all of them here). Now the lost range is dropped with
    a warning and the new messages are read, as the Kafka source does; with failOnDataLoss (the default) the query
    fails naming the queues (issue #33 item 15)."""
    from tests.integration.cli_kit import run_cli

    topic = "SparkRecreated"
    old = produce(broker, topic, 40)
    out, cp = tmp_path / "out", tmp_path / "cp"

    def run_once(**options: str) -> Any:
        q = (_to_files(_stream(spark, broker, topic, startingOffsets="earliest", **options), out, cp)
             .trigger(availableNow=True).start())
        try:
            q.awaitTermination(180)
        except Exception:  # noqa: BLE001 - a failed query raises here; q.exception() says why
            pass
        return q

    first = run_once()
    assert first.exception() is None
    assert sorted(r.msg_id for r in spark.read.parquet(str(out)).collect()) == sorted(old)

    deleted = run_cli(["topic", "delete", topic, "--namesrv", broker.namesrv_address])
    assert deleted.returncode == 0, deleted.stderr
    new = produce(broker, topic, 8)   # auto-created again: each queue ends well below the checkpoint
    assert max(queue_max_offsets(broker, topic).values()) < 10

    strict = run_once()
    assert strict.exception() is not None and "went back past the query's offsets" in str(strict.exception())

    lenient = run_once(failOnDataLoss="false")
    assert lenient.exception() is None
    got = [r.msg_id for r in spark.read.parquet(str(out)).collect()]
    assert sorted(got) == sorted(old + new), "every new message is read once, nothing old twice"
