"""The Spark source's planning without Spark: offset JSON, option parsing, range splitting, trigger limits,
and that rmqrun and rmqrun.spark import (and fail clearly) without pyspark."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rmqrun.model import MessageQueue
from rmqrun.spark.errors import OptionError
from rmqrun.spark.offsets import decode, dumps, encode, parse_offset_spec
from rmqrun.spark.options import ReadOptions, WriteOptions
from rmqrun.spark.ranges import QueueRange, check_order, pack, plan_ranges, share_limit, split


def mq(q: int, topic: str = "T", broker: str = "broker-a") -> MessageQueue:
    return MessageQueue(topic, broker, q)


def test_offsets_json_is_sorted_and_round_trips() -> None:
    offsets = {mq(10): 5, mq(2): 7, mq(0, "A", "broker-b"): 1, mq(1, "A", "broker-a"): 3}
    text = dumps(offsets)
    assert text == '{"A":{"broker-a:1":3,"broker-b:0":1},"T":{"broker-a:10":5,"broker-a:2":7}}'
    assert decode(json.loads(text)) == offsets
    # The same offsets in any insertion order give the same text (Spark compares offsets as text).
    assert json.dumps(encode(dict(reversed(list(offsets.items()))))) == json.dumps(encode(offsets))


def test_offset_spec_parsing() -> None:
    spec = parse_offset_spec('{"T": {"broker-a:1": 4, "broker-a:0": -2}}', "startingOffsets", ["T"],
                             allow_timestamp=True)
    assert spec.kind == "json" and spec.as_map() == {mq(0): -2, mq(1): 4}
    assert parse_offset_spec("timestamp:1700000000000", "startingOffsets", ["T"],
                             allow_timestamp=True).timestamp_ms == 1700000000000
    with pytest.raises(OptionError, match="endingOffsets: timestamp:<ms> is not allowed"):
        parse_offset_spec("timestamp:1", "endingOffsets", ["T"], allow_timestamp=False)
    with pytest.raises(OptionError, match="offset of T broker-a:0 must be an integer"):
        parse_offset_spec('{"T": {"broker-a:0": -3}}', "startingOffsets", ["T"], allow_timestamp=True)


def test_options_are_case_insensitive_and_checked() -> None:
    opts = ReadOptions.parse({"NAMESRV": "127.0.0.1:1", "Topic": "A, B", "maxoffsetspertrigger": "9",
                              "GROUP": "g", "failOnDataLoss": "false"}, streaming=True)
    assert opts.topics == ("A", "B") and opts.max_offsets_per_trigger == 9 and opts.group == "g"
    assert opts.fail_on_data_loss is False and opts.starting.kind == "latest"
    assert ReadOptions.parse({"namesrv": "x:1", "topic": "A"}).starting.kind == "earliest"
    with pytest.raises(OptionError, match="option minPartitions must be >= 1, got 0"):
        ReadOptions.parse({"namesrv": "x:1", "topic": "A", "minPartitions": "0"})
    with pytest.raises(OptionError, match="option failOnDataLoss must be true or false"):
        ReadOptions.parse({"namesrv": "x:1", "topic": "A", "failOnDataLoss": "maybe"})
    with pytest.raises(OptionError, match="option endingOffsets is for batch queries only"):
        ReadOptions.parse({"namesrv": "x:1", "topic": "A", "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(OptionError, match="option topic lists a topic twice"):
        ReadOptions.parse({"namesrv": "x:1", "topic": "A,A"})
    with pytest.raises(OptionError, match="sink option topic must name one topic"):
        WriteOptions.parse({"namesrv": "x:1", "topic": "A,B"})


def test_split_covers_each_range_exactly_once() -> None:
    ranges = [QueueRange("T", "b", 0, 0, 100), QueueRange("T", "b", 1, 10, 13), QueueRange("T", "b", 2, 5, 5)]
    for kw in ({}, {"max_records": 7}, {"min_partitions": 10}, {"min_partitions": 50, "max_records": 30}):
        pieces = split(ranges, **kw)  # type: ignore[arg-type]
        covered = sorted((p.queue_id, o) for p in pieces for o in range(p.start, p.end))
        assert covered == [(0, o) for o in range(100)] + [(1, o) for o in range(10, 13)], kw
        if "max_records" in kw:
            assert all(p.size <= kw["max_records"] for p in pieces)
        if "min_partitions" in kw:
            assert len(pieces) >= kw["min_partitions"]


def test_pack_gives_small_queues_to_one_task_and_never_splits_or_drops_one() -> None:
    small = [QueueRange("T", "b", q, 0, 12_500) for q in range(4)]
    assert [[r.queue_id for r in g] for g in pack(small, 16_384)] == [[0, 1], [2, 3]]
    big = [QueueRange("T", "b", q, 0, 50_000) for q in range(4)]
    assert pack(big, 16_384) == [(r,) for r in big], "a queue as large as a task's share keeps its own task"
    mixed = [QueueRange("T", "b", 0, 0, 3), QueueRange("T", "b", 1, 10, 10_000), QueueRange("T", "b", 2, 0, 20_000),
             QueueRange("T", "b", 3, 5, 9)]
    groups = pack(mixed, 16_384)
    assert [r for g in groups for r in g] == mixed, "every range once, whole, in order"
    assert [sum(r.size for r in g) for g in groups] == [29_993, 4]
    assert pack(small, 1) == [(r,) for r in small]
    assert pack([], 16) == []


def test_split_of_nothing_is_nothing() -> None:
    assert split([QueueRange("T", "b", 0, 5, 5)], min_partitions=4) == []


def test_plan_refuses_ending_before_starting() -> None:
    with pytest.raises(OptionError, match="endingOffsets is before startingOffsets: T broker-a:1: start 5 > end 4"):
        check_order({mq(0): 1, mq(1): 5}, {mq(0): 2, mq(1): 4})
    assert plan_ranges({mq(0): 1}, {mq(0): 3, mq(1): 2}) == [QueueRange("T", "broker-a", 0, 1, 3),
                                                            QueueRange("T", "broker-a", 1, 0, 2)]


def test_share_limit_reads_at_most_the_limit_in_proportion() -> None:
    start = {mq(0): 0, mq(1): 10, mq(2): 5}
    latest = {mq(0): 90, mq(1): 20, mq(2): 5}
    end = share_limit(start, latest, 10)
    assert sum(end[q] - start[q] for q in start) == 10
    assert end[mq(2)] == 5 and end[mq(0)] - 0 == 9 and end[mq(1)] - 10 == 1
    assert share_limit(start, latest, 1000) == latest
    # Repeated triggers always make progress and end exactly at latest.
    cur = dict(start)
    for _ in range(200):
        cur = share_limit(cur, latest, 3)
    assert cur == latest


def test_import_without_pyspark_and_one_clear_error_from_register() -> None:
    code = (
        "import sys; sys.modules['pyspark'] = None\n"
        "import rmqrun, rmqrun.spark, rmqrun.spark.ranges, rmqrun.spark.options\n"
        "try:\n"
        "    rmqrun.spark.register(object())\n"
        "except rmqrun.spark.SparkSupportMissing as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("rmqrun.spark needs PySpark 4.x: pip install 'rmqrun[spark]'")
    assert len(out.stdout.strip().splitlines()) == 1


def test_missing_java_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import rmqrun.spark

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(rmqrun.spark.SparkSupportMissing, match="Spark needs Java 17"):
        rmqrun.spark.require_java()
    with pytest.raises(rmqrun.spark.SparkSupportMissing, match="Spark needs Java 17"):
        rmqrun.spark.session("local[1]")   # refused before any JVM is started


class _Queue:
    """A pull consumer over one queue whose offsets below ``low`` were deleted by retention."""

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high

    def pull(self, q, tags, offset, max_nums=32):  # type: ignore[no-untyped-def]
        from rmqrun.model import Message
        from rmqrun.pull import PullResult, PullStatus

        if offset < self.low or offset > self.high:
            return PullResult(PullStatus.OFFSET_ILLEGAL, self.low, self.low, self.high)
        if offset == self.high:
            return PullResult(PullStatus.NO_NEW_MSG, offset, self.low, self.high)
        got = range(offset, min(self.high, offset + max_nums))
        return PullResult(PullStatus.FOUND, got[-1] + 1, self.low, self.high,
                          [Message("T", b"x", queue_id=0, queue_offset=o) for o in got])


def test_read_range_stops_at_its_end_and_handles_lost_offsets() -> None:
    from rmqrun.spark.errors import SourceError
    from rmqrun.spark.pulling import read_range

    whole = QueueRange("T", "broker-a", 0, 0, 10)
    assert [m.queue_offset for m in read_range(_Queue(0, 50), whole, batch_size=4)] == list(range(10))
    with pytest.raises(SourceError, match=r"offsets 0\.\.4 were deleted .*failOnDataLoss=false"):
        list(read_range(_Queue(5, 50), whole))
    assert [m.queue_offset for m in read_range(_Queue(5, 50), whole, fail_on_data_loss=False)] == list(range(5, 10))
    with pytest.raises(SourceError, match="the queue ends at 7, before the planned end 10"):
        list(read_range(_Queue(0, 7), whole))


class _TaggedQueue:
    """A pull consumer over one queue of tagged messages that filters as a broker does: it scans
    the consume queue past ``max_nums`` entries (RocketMQ scans up to 16000 bytes of entries)
    until ``max_nums`` messages match, so a pull can answer offsets beyond the ones asked for."""

    def __init__(self, tags: list[str]) -> None:
        self.tags = tags

    def pull(self, q, tags, offset, max_nums=32):  # type: ignore[no-untyped-def]
        from rmqrun.model import Message
        from rmqrun.pull import PullResult, PullStatus

        end = len(self.tags)
        if offset >= end:
            return PullResult(PullStatus.NO_NEW_MSG, offset, 0, end)
        wanted = {t.strip() for t in tags.split("||")}
        picked = [o for o in range(offset, end) if tags == "*" or self.tags[o] in wanted][:max_nums]
        if not picked:
            return PullResult(PullStatus.NO_MATCHED_MSG, end, 0, end)
        next_begin = picked[-1] + 1 if len(picked) == max_nums else end
        return PullResult(PullStatus.FOUND, next_begin, 0, end,
                          [Message("T", b"x", {"TAGS": self.tags[o]}, queue_id=0, queue_offset=o) for o in picked])


def test_read_range_with_a_tag_filter_keeps_what_the_broker_scanned_past_its_end_out() -> None:
    from rmqrun.spark.pulling import read_range

    queue = _TaggedQueue(["B", "B", "B", "B", "A", "A", "B", "A", "B"])
    # The premise: asked for 5 entries from 0, the broker answers offsets 4, 5 and 7.
    assert [m.queue_offset for m in queue.pull(None, "A", 0, max_nums=5).messages] == [4, 5, 7]
    first, second = QueueRange("T", "broker-a", 0, 0, 5), QueueRange("T", "broker-a", 0, 5, 9)
    assert [m.queue_offset for m in read_range(queue, first, "A")] == [4]
    assert [m.queue_offset for m in read_range(queue, second, "A")] == [5, 7]
    # However the pieces are cut, each matching offset is read by exactly one of them.
    for cut in range(1, 9):
        pieces = [QueueRange("T", "broker-a", 0, 0, cut), QueueRange("T", "broker-a", 0, cut, 9)]
        got = [m.queue_offset for r in pieces for m in read_range(queue, r, "A", batch_size=2)]
        assert got == [4, 5, 7], cut


def test_stream_planning_bounds_batches_and_reports_queues_that_went_back() -> None:
    pytest.importorskip("pyspark")
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    from rmqrun.spark import stream
    from rmqrun.spark.errors import SourceError
    from rmqrun.spark.offsets import encode

    class Brokers:
        namesrv = "fake:1"

        def __init__(self) -> None:
            self.top = {mq(0): 10, mq(1): 4}

        def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
            return sorted(self.top)

        def max_offset(self, q: MessageQueue) -> int:
            return self.top[q]

        def min_offset(self, q: MessageQueue) -> int:
            return 1 if q == mq(1) else 0

    fake = Brokers()
    for fail in (True, False):
        opts = ReadOptions.parse({"namesrv": "fake:1", "topic": "T", "failOnDataLoss": str(fail)}, streaming=True)
        stream._PLANNER_CONSUMERS[(opts.namesrv, "", opts.pull_timeout)] = fake
        reader = stream.RocketMQStreamReader(opts)
        start = encode({mq(0): 2, mq(1): 4})
        assert reader.latestOffset(start, ReadMaxRows(3)) == encode({mq(0): 5, mq(1): 4})
        assert reader.latestOffset(start, ReadAllAvailable()) == encode({mq(0): 10, mq(1): 4})
        behind = encode({mq(0): 2, mq(1): 7})
        if fail:
            with pytest.raises(SourceError, match="T broker-a:1 max offset 4 < checkpointed 7"):
                reader.latestOffset(behind, ReadAllAvailable())
        else:
            # the lost range 4..6 is dropped; the queue is read again from its min offset (1), up to its max (4)
            end = reader.latestOffset(behind, ReadAllAvailable())
            assert end == encode({mq(0): 10, mq(1): 4})
            assert [(r.queue_id, r.start, r.end) for p in reader.partitions(behind, end) for r in p.ranges] == \
                [(0, 2, 10), (1, 1, 4)]
            # a bounded trigger shares its rows counting the queue from where it is read again
            assert reader.latestOffset(behind, ReadMaxRows(4)) == encode({mq(0): 5, mq(1): 2})
    stream._PLANNER_CONSUMERS.clear()


def test_sink_pipelines_sends_but_keeps_each_sharding_keys_order() -> None:
    pytest.importorskip("pyspark")
    import asyncio
    import random

    from rmqrun.spark.errors import SourceError
    from rmqrun.spark.sink import _Sends

    class SlowProducer:
        """Answers after a random delay, so concurrent sends finish out of order."""

        def __init__(self, fail_on: str | None = None) -> None:
            self.stored: list[tuple[str | None, bytes]] = []
            self.in_flight = self.most_in_flight = 0
            self.fail_on = fail_on

        async def send(self, topic, body, *, tags=None, keys=None, properties=None, sharding_key=None):  # type: ignore[no-untyped-def]
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            await asyncio.sleep(random.random() / 200)
            self.in_flight -= 1
            if body == self.fail_on:
                raise RuntimeError("CODE: 14 broker busy")
            self.stored.append((sharding_key, body))

    async def run(producer: SlowProducer, rows: list[tuple[str | None, bytes]]) -> int:
        sends = _Sends(producer, WriteOptions("ns:1", "T"))
        for key, body in rows:
            await sends.submit(body, None, None, None, key)
        await sends.drain()
        return sends.sent

    rows = [(f"k{i % 3}" if i % 4 else None, f"{i}".encode()) for i in range(200)]
    producer = SlowProducer()
    assert asyncio.run(run(producer, rows)) == 200
    assert producer.most_in_flight > 3, "sends are pipelined"
    for k in ("k0", "k1", "k2"):
        assert [b for key, b in producer.stored if key == k] == [b for key, b in rows if key == k]

    with pytest.raises(SourceError, match="sending to topic T via ns:1 failed .*CODE: 14 broker busy"):
        asyncio.run(run(SlowProducer(fail_on=b"50"), rows))


@pytest.mark.parametrize(("options", "streaming", "words"), [
    ({"namesrv": "x:1", "topic": "A", "colour": "red"}, False, "rocketmq source: unknown option(s) colour"),
    ({"topic": "A"}, False, "rocketmq source option namesrv is required"),
    ({"namesrv": "x:1", "topic": " , "}, False, "rocketmq source option topic names no topic"),
    ({"namesrv": "x:1", "topic": "A", "startingOffsets": "latest"}, False, "'latest' is not allowed in a batch"),
    ({"namesrv": "x:1", "topic": "A", "endingOffsets": "latest"}, True, "endingOffsets is for batch queries only"),
    ({"namesrv": "x:1", "topic": "A", "endingOffsets": "earliest"}, False, "endingOffsets: 'earliest' is not allowed"),
    ({"namesrv": "x:1", "topic": "A", "maxOffsetsPerTrigger": "5"}, False, "maxOffsetsPerTrigger is for streaming"),
])
def test_read_option_refusals_name_the_option(options: dict[str, str], streaming: bool, words: str) -> None:
    with pytest.raises(OptionError) as err:
        ReadOptions.parse(options, streaming=streaming)
    assert words in str(err.value)


def test_a_batch_read_takes_a_group_to_pull_as() -> None:
    # an ACL account may be allowed only its own group: a batch pulls as it (and commits nothing)
    assert ReadOptions.parse({"namesrv": "x:1", "topic": "A", "group": "g"}, streaming=False).group == "g"


def test_read_options_take_an_ending_map_and_write_options_their_timeout() -> None:
    opts = ReadOptions.parse({"namesrv": "x:1", "topic": "A", "endingOffsets": '{"A": {"broker-a:0": 3}}',
                              "pullTimeoutMs": "2500", "pullBatchSize": "8"})
    assert opts.ending.as_map() == {mq(0, "A"): 3} and opts.pull_timeout == 2.5 and opts.pull_batch_size == 8
    out = WriteOptions.parse({"namesrv": "x:1", "topic": "Out", "sendTimeoutMs": "1500", "producerGroup": "PG"})
    assert (out.topic, out.send_timeout, out.producer_group) == ("Out", 1.5, "PG")
    with pytest.raises(OptionError, match="rocketmq sink option topic must name one topic, got 'A,B'"):
        WriteOptions.parse({"namesrv": "x:1", "topic": "A,B"})


def test_share_limit_grants_the_whole_limit_when_queues_outnumber_it() -> None:
    """Eight queues one message behind each and maxOffsetsPerTrigger=3: every proportional share rounds
    down to 0, so the leftover must be granted too, or no trigger would ever read anything."""
    start = {mq(q): 10 for q in range(8)}
    latest = {mq(q): 11 for q in range(8)}
    end = share_limit(start, latest, 3)
    assert sum(end[q] - start[q] for q in start) == 3
    cur = dict(start)
    for _ in range(3):
        cur = share_limit(cur, latest, 3)
    assert cur == latest


def test_a_start_by_timestamp_includes_the_message_stored_at_that_time() -> None:
    """As Kafka's offsetsForTimes: the first message stored at or after the time, so one stored at exactly
    that millisecond is read (searchOffset's answer, the nearest message, may be older and is passed over)."""
    from rmqrun.model import Message
    from rmqrun.pull import PullResult, PullStatus
    from rmqrun.spark.ranges import first_stored_at_or_after

    class Stamped:
        stamps = [1000, 2000, 2000, 3000]

        def max_offset(self, q: MessageQueue) -> int:
            return len(self.stamps)

        def min_offset(self, q: MessageQueue) -> int:
            return 0

        def search_offset(self, q: MessageQueue, ts: int) -> int:
            return 0

        def pull(self, q, tags, offset, max_nums=32):  # type: ignore[no-untyped-def]
            got = range(offset, min(len(self.stamps), offset + max_nums))
            return PullResult(PullStatus.FOUND, got[-1] + 1, 0, len(self.stamps),
                              [Message("T", b"x", queue_id=0, queue_offset=o, store_timestamp=self.stamps[o])
                               for o in got])

    assert first_stored_at_or_after(Stamped(), mq(0), 2000) == 1
    assert first_stored_at_or_after(Stamped(), mq(0), 1999) == 1
    assert first_stored_at_or_after(Stamped(), mq(0), 3000) == 3
    assert first_stored_at_or_after(Stamped(), mq(0), 3001) is None


def test_stream_planning_keeps_the_offset_of_a_queue_gone_from_the_route() -> None:
    """A queue missing from the route for a while (its broker restarting) keeps its offset in every end the
    planner answers; when it is back it goes on from there, not from 0 (everything read again)."""
    pytest.importorskip("pyspark")
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from rmqrun.spark import stream
    from rmqrun.spark.offsets import encode

    class Brokers:
        namesrv = "fake:1"

        def __init__(self) -> None:
            self.top = {mq(0): 10}

        def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
            return sorted(self.top)

        def max_offset(self, q: MessageQueue) -> int:
            return self.top[q]

    fake = Brokers()
    opts = ReadOptions.parse({"namesrv": "fake:1", "topic": "T"}, streaming=True)
    stream._PLANNER_CONSUMERS[(opts.namesrv, "", opts.pull_timeout)] = fake
    try:
        reader = stream.RocketMQStreamReader(opts)
        first = reader.latestOffset(encode({mq(0): 2, mq(1): 4}), ReadAllAvailable())
        assert first == encode({mq(0): 10, mq(1): 4})
        fake.top[mq(1)] = 6                      # its broker is back, with two new messages
        second = reader.latestOffset(first, ReadAllAvailable())
        assert second == encode({mq(0): 10, mq(1): 6})
        ranges = [r for p in reader.partitions(first, second) for r in p.ranges]
        assert [(r.queue_id, r.start, r.end) for r in ranges] == [(1, 4, 6)]
    finally:
        stream._PLANNER_CONSUMERS.clear()
