"""Bad input to the rocketmq source and sink: one clear error naming the option, raised while planning."""

from __future__ import annotations

import json
import socket
from typing import Any, Iterator

import pytest

from tests.integration.signals_kit import produce, queue_max_offsets

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def topic(broker: Any) -> str:
    produce(broker, "SparkErr", 8)
    return "SparkErr"


@pytest.fixture
def silent_namesrv() -> Iterator[str]:
    """A port nobody listens on (bound then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    yield f"127.0.0.1:{port}"


def _error_of_read(spark: Any, options: dict[str, str]) -> str:
    r = spark.read.format("rocketmq")
    for k, v in options.items():
        r = r.option(k, v)
    with pytest.raises(Exception) as info:
        r.load().collect()
    return str(info.value)


def _error_of_stream(spark: Any, options: dict[str, str], tmp_path: Any) -> str:
    r = spark.readStream.format("rocketmq")
    for k, v in options.items():
        r = r.option(k, v)
    with pytest.raises(Exception) as info:
        q = (r.load().writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
        try:
            q.awaitTermination(120)
        finally:
            q.stop()
    return str(info.value)


def test_unknown_option_is_named(spark: Any, broker: Any, topic: str) -> None:
    text = _error_of_read(spark, {"namesrv": broker.namesrv_address, "topic": topic, "startingOffset": "earliest"})
    assert "unknown option(s) startingoffset" in text and "startingOffsets" in text


def test_missing_namesrv_is_named(spark: Any, topic: str) -> None:
    assert "option namesrv is required" in _error_of_read(spark, {"topic": topic})


@pytest.mark.parametrize("raw, expected", [
    ("{not json", "option startingOffsets is not valid JSON"),
    ('{"SparkErr": {"0": 1}}', "queue key '0' is not"),
    ('{"SparkErr": {"broker-a:0": "x"}}', "offset of SparkErr broker-a:0 must be an integer"),
    ('{"Other": {"broker-a:0": 1}}', "names topic 'Other', which is not in option topic"),
    ('{"SparkErr": {"broker-a:99": 1}}', "option startingOffsets names queue(s) that do not exist"),
    ('{"SparkErr": {"broker-a:0": 1000}}', "offset 1000 of SparkErr broker-a:0 is past the queue's end"),
    ("yesterday", "option startingOffsets must be earliest, latest, timestamp:<ms> or a JSON map"),
])
def test_malformed_starting_offsets_are_named(spark: Any, broker: Any, topic: str, raw: str, expected: str) -> None:
    text = _error_of_read(spark, {"namesrv": broker.namesrv_address, "topic": topic, "startingOffsets": raw})
    assert expected in text


def test_topic_that_does_not_exist_is_named(spark: Any, broker: Any) -> None:
    text = _error_of_read(spark, {"namesrv": broker.namesrv_address, "topic": "NoSuchTopic"})
    assert "option topic: topic 'NoSuchTopic' does not exist" in text
    assert "ranges.py" not in text and "options.py" not in text, "the message, not our call stack"


def test_name_server_that_does_not_answer_is_named(spark: Any, silent_namesrv: str, topic: str) -> None:
    text = _error_of_read(spark, {"namesrv": silent_namesrv, "topic": topic})
    assert f"option namesrv: name server {silent_namesrv} did not answer" in text


def test_ending_before_starting_is_named(spark: Any, broker: Any, topic: str) -> None:
    q, top = max(queue_max_offsets(broker, topic).items(), key=lambda kv: kv[1])
    assert top >= 2
    start = json.dumps({topic: {f"broker-a:{q}": top}})
    end = json.dumps({topic: {f"broker-a:{q}": top - 1}})
    text = _error_of_read(spark, {"namesrv": broker.namesrv_address, "topic": topic, "startingOffsets": start,
                                  "endingOffsets": end})
    assert f"option endingOffsets is before startingOffsets: {topic} broker-a:{q}: start {top} > end {top - 1}" in text


def test_streaming_only_options_are_refused_in_batch(spark: Any, broker: Any, topic: str) -> None:
    text = _error_of_read(spark, {"namesrv": broker.namesrv_address, "topic": topic, "maxOffsetsPerTrigger": "5"})
    assert "option maxOffsetsPerTrigger is for streaming queries only" in text


def test_stream_errors_are_named(spark: Any, broker: Any, topic: str, tmp_path: Any) -> None:
    text = _error_of_stream(spark, {"namesrv": broker.namesrv_address, "topic": topic,
                                    "maxOffsetsPerTrigger": "zero"}, tmp_path / "a")
    assert "option maxOffsetsPerTrigger must be an integer, got 'zero'" in text
    text = _error_of_stream(spark, {"namesrv": broker.namesrv_address, "topic": "NoSuchStreamTopic"},
                            tmp_path / "b")
    assert "option topic: topic 'NoSuchStreamTopic' does not exist" in text
    assert "ranges.py" not in text, "the message, not our call stack"


def test_sink_errors_are_named(spark: Any, broker: Any, silent_namesrv: str) -> None:
    df = spark.createDataFrame([("a", "x")], "body string, colour string")
    with pytest.raises(Exception) as info:
        df.write.format("rocketmq").option("namesrv", broker.namesrv_address).option("topic", "SinkErr") \
            .mode("append").save()
    assert "unknown column(s) colour" in str(info.value)
    with pytest.raises(Exception) as info:
        df.select("colour").write.format("rocketmq").option("namesrv", broker.namesrv_address) \
            .option("topic", "SinkErr").mode("append").save()
    assert "rocketmq sink needs a column body" in str(info.value)
    with pytest.raises(Exception) as info:
        df.select("body").write.format("rocketmq").option("namesrv", silent_namesrv) \
            .option("topic", "SinkErr").mode("append").save()
    assert "rocketmq sink: sending to topic SinkErr" in str(info.value)


def test_sink_failure_names_the_topic_and_the_answer(spark: Any, tmp_path: Any) -> None:
    from tests.integration.signals_kit import start_broker

    strict = start_broker(tmp_path, auto_create_topic=False)
    try:
        df = spark.createDataFrame([(b"x",)], "body binary")
        with pytest.raises(Exception) as info:
            df.write.format("rocketmq").option("namesrv", strict.namesrv_address).option("topic", "NoAutoCreate") \
                .option("createTopic", "true").mode("append").save()
        text = str(info.value)
        assert "rocketmq sink: sending to topic NoAutoCreate" in text and "TOPIC_NOT_EXIST" in text
    finally:
        strict.stop_in_thread()


@pytest.mark.parametrize("option, raw, expected", [
    ("startingOffsets", '{"SparkErr": {"broker-a:0": -1}}',
     "option startingOffsets: SparkErr broker-a:0 can't be latest (-1) for batch queries"),
    ("endingOffsets", '{"SparkErr": {"broker-a:1": -2}}',
     "option endingOffsets: SparkErr broker-a:1 can't be earliest (-2) for batch queries"),
])
def test_a_batch_range_that_could_only_be_empty_is_refused_as_kafka_does(
        spark: Any, broker: Any, topic: str, option: str, raw: str, expected: str) -> None:
    """-1 as a batch start or -2 as a batch end read 0 rows of that queue without a word (issue #33 item 14)."""
    assert expected in _error_of_read(spark, {"namesrv": broker.namesrv_address, "topic": topic, option: raw})
    # the other ends are fine: -2 as a start, -1 as an end are the whole queue
    whole = {"startingOffsets": '{"SparkErr": {"broker-a:0": -2}}', "endingOffsets": '{"SparkErr": {"broker-a:0": -1}}'}
    df = spark.read.format("rocketmq").option("namesrv", broker.namesrv_address).option("topic", topic)
    for k, v in whole.items():
        df = df.option(k, v)
    assert df.load().filter("queue_id = 0").count() == queue_max_offsets(broker, topic)[0]
