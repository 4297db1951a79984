"""Parsing of the Kafka-named source/sink options of issue #25 (no Spark, no broker): values and clear errors."""

from __future__ import annotations

import pytest

from rmqrun.model import MessageQueue
from rmqrun.spark.errors import OptionError
from rmqrun.spark.options import DEFAULT_MAX_TRIGGER_DELAY, ReadOptions, WriteOptions

BASE = {"namesrv": "127.0.0.1:9876"}


def test_trigger_limits_and_pattern_are_parsed() -> None:
    o = ReadOptions.parse({**BASE, "subscribePattern": "Orders-.*", "minOffsetsPerTrigger": "10",
                           "maxTriggerDelay": "30s", "maxOffsetsPerTrigger": "100"}, streaming=True)
    assert (o.topics, o.pattern, o.min_offsets_per_trigger, o.max_trigger_delay) == ((), "Orders-.*", 10, 30.0)
    assert ReadOptions.parse({**BASE, "topic": "T", "minOffsetsPerTrigger": "3"},
                             streaming=True).max_trigger_delay == DEFAULT_MAX_TRIGGER_DELAY
    for raw, seconds in (("500ms", 0.5), ("2m", 120.0), ("1h", 3600.0), ("250", 0.25)):
        got = ReadOptions.parse({**BASE, "topic": "T", "minOffsetsPerTrigger": "1", "maxTriggerDelay": raw},
                                streaming=True).max_trigger_delay
        assert got == seconds, raw


def test_timestamp_maps_keep_the_other_offsets_as_fallback() -> None:
    o = ReadOptions.parse({**BASE, "topic": "T", "startingOffsets": "latest",
                           "startingOffsetsByTimestamp": '{"T": {"broker-a:1": 1700000000000}}',
                           "startingOffsetsByTimestampStrategy": "LATEST"}, streaming=True)
    assert o.starting.kind == "timestamps" and o.starting.strategy == "latest"
    assert o.starting.as_map() == {MessageQueue("T", "broker-a", 1): 1700000000000}
    assert o.starting.fallback is not None and o.starting.fallback.kind == "latest"
    o = ReadOptions.parse({**BASE, "topic": "T", "endingOffsetsByTimestamp": '{"T": {"broker-a:0": 5}}'})
    assert o.ending.kind == "timestamps" and o.ending.fallback is not None and o.ending.fallback.kind == "latest"


@pytest.mark.parametrize("options, streaming, fragment", [
    ({"topic": "T", "subscribePattern": "T.*"}, True, "give option topic or subscribePattern, not both"),
    ({}, True, "one of the options topic or subscribePattern is required"),
    ({"subscribePattern": "(unclosed"}, True, "subscribePattern is not a valid regular expression"),
    ({"topic": "T", "minOffsetsPerTrigger": "5"}, False, "minOffsetsPerTrigger is for streaming queries only"),
    ({"topic": "T", "maxTriggerDelay": "5s"}, True, "maxTriggerDelay needs option minOffsetsPerTrigger"),
    ({"topic": "T", "minOffsetsPerTrigger": "5", "maxTriggerDelay": "soon"}, True,
     "maxTriggerDelay must be a duration like 30s"),
    ({"topic": "T", "minOffsetsPerTrigger": "50", "maxOffsetsPerTrigger": "10"}, True,
     "minOffsetsPerTrigger (50) is larger than maxOffsetsPerTrigger (10)"),
    ({"topic": "T", "startingOffsetsByTimestamp": "{bad"}, True, "startingOffsetsByTimestamp is not valid JSON"),
    ({"topic": "T", "startingOffsetsByTimestamp": "1700000000000"}, True,
     "startingOffsetsByTimestamp must be a JSON map"),
    ({"topic": "T", "startingOffsetsByTimestamp": '{"U": {"broker-a:0": 1}}'}, True,
     "names topic 'U', which is not in option topic"),
    ({"topic": "T", "startingOffsetsByTimestamp": '{"T": {"broker-a:0": -1}}'}, True,
     "timestamp of T broker-a:0 must be milliseconds since the epoch"),
    ({"topic": "T", "startingOffsetsByTimestamp": '{"T": {"a": 1}}'}, True, "is not \"<brokerName>:<queueId>\""),
    ({"topic": "T", "startingOffsetsByTimestamp": '{"T": {"b:0": 1}}',
      "startingOffsetsByTimestampStrategy": "skip"}, True, "startingOffsetsByTimestampStrategy must be error or"),
    ({"topic": "T", "startingOffsetsByTimestampStrategy": "latest"}, True,
     "startingOffsetsByTimestampStrategy needs option startingOffsetsByTimestamp"),
    ({"topic": "T", "endingOffsetsByTimestamp": '{"T": {"b:0": 1}}'}, True,
     "endingOffsetsByTimestamp is for batch queries only"),
])
def test_bad_source_options_are_named(options: dict[str, str], streaming: bool, fragment: str) -> None:
    with pytest.raises(OptionError) as info:
        ReadOptions.parse({**BASE, **options}, streaming=streaming)
    assert fragment in str(info.value)


def test_sink_topic_option_is_optional_and_create_topic_is_a_flag() -> None:
    assert WriteOptions.parse(BASE).topic is None
    o = WriteOptions.parse({**BASE, "topic": "Out", "createTopic": "true"})
    assert (o.topic, o.create_topic) == ("Out", True)
    assert WriteOptions.parse({**BASE, "topic": "Out"}).create_topic is False
    with pytest.raises(OptionError, match="createTopic must be true or false"):
        WriteOptions.parse({**BASE, "createTopic": "maybe"})


def test_a_batch_refuses_latest_as_a_start_and_earliest_as_an_end_but_a_stream_takes_them() -> None:
    """Kafka's rule for batch queries (issue #33 item 14): a queue that could only read nothing is a mistake."""
    start_latest = {**BASE, "topic": "T", "startingOffsets": '{"T": {"broker-a:0": -1, "broker-a:1": 5}}'}
    with pytest.raises(OptionError, match=r"option startingOffsets: T broker-a:0 can't be latest \(-1\) for batch"):
        ReadOptions.parse(start_latest, streaming=False)
    assert ReadOptions.parse(start_latest, streaming=True).starting.kind == "json"
    with pytest.raises(OptionError, match=r"option endingOffsets: T broker-a:1 can't be earliest \(-2\) for batch"):
        ReadOptions.parse({**BASE, "topic": "T", "endingOffsets": '{"T": {"broker-a:1": -2}}'}, streaming=False)
    fine = ReadOptions.parse({**BASE, "topic": "T", "startingOffsets": '{"T": {"broker-a:0": -2}}',
                              "endingOffsets": '{"T": {"broker-a:0": -1}}'}, streaming=False)
    assert fine.starting.as_map() == {MessageQueue("T", "broker-a", 0): -2}
