"""Dead letters without a broker: the broker's DLQ rule, the counter and its one line, the DLQ reader's
edges (no DLQ, a write-only one, undecodable records), the filter and the re-driven copy."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from loguru import logger

from rmqrun.client.errors import NoRouteError
from rmqrun.consumer.dead_letters import (
    DeadLetterReason, DeadLetters, Failure, goes_to_dlq_on_republish, goes_to_dlq_on_send_back,
)
from rmqrun.model import Message, MessageQueue
from rmqrun.pull.dead_letters import DeadLetterQueue, DlqFilter, DlqNotReadableError, UndecodableRecord
from rmqrun.pull.errors import TopicNotFoundError
from rmqrun.pull.redrive import BOOKKEEPING, REDRIVE_PROPERTY, redrive_copy
from rmqrun.pull.result import PullResult, PullStatus
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import BrokerError, ProtocolError, TopicNotExistError

MQ = MessageQueue("%DLQ%G", "broker-a", 0)


def test_the_brokers_rule_for_each_path() -> None:
    # send-back: the stored count at or past the maximum, or a negative delay level
    assert not goes_to_dlq_on_send_back(0, 0, 1)
    assert goes_to_dlq_on_send_back(1, 0, 1)
    assert goes_to_dlq_on_send_back(0, -1, 16)
    assert not goes_to_dlq_on_send_back(15, 3, 16)
    # a send to %RETRY%: the header's reconsume count
    assert goes_to_dlq_on_republish(16, 16) and not goes_to_dlq_on_republish(15, 16)


def test_dead_letters_count_by_topic_and_reason_and_log_one_line() -> None:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), format="{message}")
    try:
        dead = DeadLetters("G", "ns", ("Orders",))
        assert dead.counts == {("Orders", r.value): 0 for r in DeadLetterReason}
        dead.record(DeadLetterReason.MAX_RECONSUME, msg_id="ID1", topic="ns%Orders", attempts=17,
                    failure=Failure(MessageQueue("%RETRY%ns%G", "b", 1), 42, "boom"))
        dead.record(DeadLetterReason.UNDECODABLE, msg_id="ID2", topic="Other", attempts=1, failure=None)
    finally:
        logger.remove(sink)
    assert dead.counts[("Orders", "max_reconsume")] == 1 and dead.counts[("Other", "undecodable")] == 1
    assert lines == [
        "dead-lettered message ID1 of Orders to %DLQ%G (max_reconsume): queue %RETRY%G/b/1 offset 42, "
        "attempts 17, last error: boom\n",
        "dead-lettered message ID2 of Other to %DLQ%G (undecodable): queue unknown, attempts 1, "
        "last error: none reported\n"]
    assert {r.value for r in DeadLetterReason} == {"max_reconsume", "handler", "undecodable"}


def msg(offset: int, **props: str) -> Message:
    return Message("%DLQ%G", f"m{offset}".encode(), dict(props), msg_id=f"U{offset}", offset_msg_id=f"O{offset}",
                   broker_name="broker-a", queue_offset=offset, store_timestamp=1000 + offset)


def test_filter_by_time_key_and_any_id() -> None:
    m = msg(5, KEYS="a b", ORIGIN_MESSAGE_ID="X5")
    assert DlqFilter().matches(m) and not DlqFilter().active
    assert DlqFilter(since_ms=1005, until_ms=1005).matches(m)
    assert not DlqFilter(since_ms=1006).matches(m) and not DlqFilter(until_ms=1004).matches(m)
    assert DlqFilter(keys=frozenset({"b", "z"})).matches(m) and not DlqFilter(keys=frozenset({"ab"})).matches(m)
    for known in ("U5", "O5", "X5"):
        assert DlqFilter(msg_ids=frozenset({known})).matches(m)
    assert not DlqFilter(msg_ids=frozenset({"U6"})).matches(m)
    assert not DlqFilter(since_ms=0, keys=frozenset({"a"}), msg_ids=frozenset({"U6"})).matches(m)
    # by the topic it was consumed from (RETRY_TOPIC, as the wire names it)
    from_orders = msg(6, RETRY_TOPIC="ns%Orders")
    assert DlqFilter(topics=frozenset({"ns%Orders"})).matches(from_orders) and DlqFilter(topics=frozenset({"x"})).active
    assert not DlqFilter(topics=frozenset({"Orders"})).matches(from_orders)
    assert not DlqFilter(topics=frozenset({"ns%Orders"})).matches(m)


def test_the_redriven_copy_keeps_the_message_and_drops_the_bookkeeping() -> None:
    m = msg(7, KEYS="k1 k2", TAGS="T", UNIQ_KEY="U7", user="v", RETRY_TOPIC="ns%Orders", ORIGIN_MESSAGE_ID="O1",
            RECONSUME_TIME="16", MAX_RECONSUME_TIMES="16", DELAY="0", WAIT="false", CLUSTER="c",
            MIN_OFFSET="0", MAX_OFFSET="9", **{REDRIVE_PROPERTY: "old"})
    m.flag = 3
    copy = redrive_copy(m, MessageQueue("%DLQ%ns%G", "broker-a", 0), "ns")
    assert copy.body == b"m7" and copy.flag == 3 and copy.delay_level == 0
    # body, keys, tags, user properties and the message id kept; where it came from, in the user's names
    assert copy.properties == {"KEYS": "k1 k2", "TAGS": "T", "UNIQ_KEY": "U7", "user": "v",
                               REDRIVE_PROPERTY: "%DLQ%G@broker-a:0:7"}
    assert not (BOOKKEEPING - {REDRIVE_PROPERTY}) & set(copy.properties)


class FakeConsumer:
    """Answers pulls from a list of messages; offsets in ``bad`` do not decode."""

    def __init__(self, messages: list[Message], bad: set[int] = frozenset(), queues: Any = None) -> None:
        self.messages = messages
        self.bad = bad
        self.queues = queues
        self.pulls: list[tuple[int, int]] = []

    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        if isinstance(self.queues, BaseException):
            raise self.queues
        return [MQ]

    async def pull(self, mq: MessageQueue, expr: Any, offset: int, n: int) -> PullResult:
        self.pulls.append((offset, n))
        if isinstance(self.queues, BrokerError):
            raise self.queues
        batch = [m for m in self.messages if offset <= m.queue_offset < offset + n]
        if any(m.queue_offset in self.bad for m in batch):
            raise ProtocolError("bad record")
        if not batch:
            return PullResult(PullStatus.NO_NEW_MSG, offset, 0, len(self.messages))
        return PullResult(PullStatus.FOUND, batch[-1].queue_offset + 1, 0, len(self.messages), batch)


async def read_all(consumer: FakeConsumer, start: int, end: int) -> list[Any]:
    dead = DeadLetterQueue(consumer, "G")  # type: ignore[arg-type]
    return [item async for item in dead.read(MQ, start, end)]


def test_an_undecodable_record_is_isolated_and_hides_nothing() -> None:
    consumer = FakeConsumer([msg(i) for i in range(6)], bad={2})
    items = asyncio.run(read_all(consumer, 0, 6))
    assert [getattr(i, "queue_offset") for i in items] == [0, 1, 2, 3, 4, 5]
    assert isinstance(items[2], UndecodableRecord) and "bad record" in items[2].error
    assert all(isinstance(i, Message) for k, i in enumerate(items) if k != 2)
    # the end is exclusive; a start past it reads nothing
    assert [m.queue_offset for m in asyncio.run(read_all(FakeConsumer([msg(i) for i in range(6)]), 1, 3))] == [1, 2]


def test_no_dlq_is_empty_and_a_write_only_one_is_named() -> None:
    missing = TopicNotFoundError("%DLQ%G", "no route")
    missing.__cause__ = TopicNotExistError("no route")
    assert asyncio.run(DeadLetterQueue(FakeConsumer([], queues=missing), "G").queues()) == []  # type: ignore[arg-type]
    unreadable = TopicNotFoundError("%DLQ%G", "no readable queue")
    with pytest.raises(DlqNotReadableError, match="perm rw"):
        asyncio.run(DeadLetterQueue(FakeConsumer([], queues=unreadable), "G").queues())  # type: ignore[arg-type]
    refused = BrokerError(ResponseCode.NO_PERMISSION, "the topic[%DLQ%G] pulling message is forbidden")
    with pytest.raises(DlqNotReadableError):
        asyncio.run(read_all(FakeConsumer([msg(0)], queues=refused), 0, 1))
    assert issubclass(TopicNotFoundError, NoRouteError)


class OffsetConsumer(FakeConsumer):
    """A fake with the re-drive group's offset: ``stored`` is what the broker holds, ``persists`` each write."""

    def __init__(self, messages: list[Message], stored: int = -1, **kw: Any) -> None:
        super().__init__(messages, **kw)
        self.stored = stored
        self.pending: int | None = None
        self.persists: list[int] = []

    async def min_offset(self, mq: MessageQueue) -> int:
        return 0

    async def max_offset(self, mq: MessageQueue) -> int:
        return len(self.messages)

    async def fetch_consume_offset(self, mq: MessageQueue) -> int:
        return self.stored

    async def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        self.pending = offset

    async def persist_consume_offsets(self) -> None:
        if self.pending is not None:
            self.stored = self.pending
            self.persists.append(self.pending)
            self.pending = None


class FakeProducer:
    def __init__(self, fail_body: bytes | None = None) -> None:
        self.sent: list[tuple[str, Any]] = []
        self.fail_body = fail_body

    async def send_message(self, topic: str, out: Any) -> Any:
        if out.body == self.fail_body:
            raise ConnectionError("broker went away")
        self.sent.append((topic, out))

        class Sent:
            offset_msg_id = f"NEW{len(self.sent)}"
        return Sent()


def redrive(consumer: OffsetConsumer, producer: FakeProducer | None, selected: DlqFilter = DlqFilter(),
            **kw: Any) -> Any:
    from rmqrun.pull.redrive import Redriver
    dead = DeadLetterQueue(consumer, "G")  # type: ignore[arg-type]
    return asyncio.run(Redriver(dead, producer, selected, **kw).run())  # type: ignore[arg-type]


def origin(i: int, **extra: str) -> Message:
    return msg(i, RETRY_TOPIC="Orders", KEYS=f"k{i}", **extra)


def test_redrive_commits_after_each_message_and_stops_on_the_one_it_cannot_send() -> None:
    consumer = OffsetConsumer([origin(i) for i in range(5)])
    producer = FakeProducer(fail_body=b"m3")
    from rmqrun.pull.redrive import RedriveError
    with pytest.raises(RedriveError, match="broker went away"):
        redrive(consumer, producer)
    assert [t for t, _ in producer.sent] == ["Orders"] * 3
    assert consumer.persists == [1, 2, 3] and consumer.stored == 3  # the failed message is the next run's first
    producer.fail_body = None
    report = redrive(consumer, producer)
    assert [m.message.queue_offset for m in report.moved] == [3, 4] and consumer.stored == 5
    assert redrive(consumer, producer).moved == [] and len(producer.sent) == 5


def test_dry_run_sends_and_commits_nothing() -> None:
    consumer = OffsetConsumer([origin(i) for i in range(3)], stored=1)
    report = redrive(consumer, None, dry_run=True)
    assert [m.message.queue_offset for m in report.moved] == [1, 2] and all(m.new_msg_id is None for m in report.moved)
    assert consumer.persists == [] and consumer.stored == 1
    assert report.queues[0][1] == 3  # where the offset would be


def test_filtered_out_messages_are_passed_over_but_until_keeps_the_rest() -> None:
    consumer = OffsetConsumer([origin(i) for i in range(4)])
    report = redrive(consumer, FakeProducer(), DlqFilter(keys=frozenset({"k1"})))
    assert [m.message.queue_offset for m in report.moved] == [1] and report.passed_over == 3
    assert consumer.stored == 4
    later = OffsetConsumer([origin(i) for i in range(4)])
    report = redrive(later, FakeProducer(), DlqFilter(until_ms=1001))  # offsets 0 and 1 stored by then
    assert [m.message.queue_offset for m in report.moved] == [0, 1] and later.stored == 2


def test_a_dead_letter_without_its_topic_needs_to_topic() -> None:
    from rmqrun.pull.redrive import RedriveError
    consumer = OffsetConsumer([msg(0)])
    with pytest.raises(RedriveError, match="--to-topic"):
        redrive(consumer, FakeProducer())
    assert consumer.stored in (-1, 0)
    producer = FakeProducer()
    redrive(consumer, producer, to_topic="Elsewhere")
    assert [t for t, _ in producer.sent] == ["Elsewhere"] and consumer.stored == 1


def test_what_dlq_list_and_show_print() -> None:
    from rmqrun.cli.dlq import format as fmt
    m = msg(4, KEYS="a b", TAGS="T", RETRY_TOPIC="ns%Orders", ORIGIN_MESSAGE_ID="X4", note="line\nbreak")
    m.reconsume_times = 16
    row = fmt.summary(m, "ns", redriven_to=5)
    assert row["origin_topic"] == "Orders" and row["keys"] == ["a", "b"] and row["redriven"] is True
    assert row["origin_msg_id"] == "X4" and row["size"] == 2 and row["reconsume_times"] == 16
    assert fmt.summary(m, "ns", redriven_to=4)["redriven"] is False
    assert fmt.summary(m, "ns", redriven_to=-1)["redriven"] is False
    assert fmt.list_line(row) == ("1970-01-01T00:00:01.004Z broker-a:0@4 id=U4 keys=a,b topic=Orders reconsumed=16 "
                                  "size=2 redriven")
    text = fmt.show_text(m, "ns", 1)
    assert "origin topic    Orders" in text and "  note = line\\nbreak" in text and "m… (2 bytes)" in text
    undecodable = fmt.undecodable_record(UndecodableRecord(MQ, 9, "bad"), 3)
    assert fmt.undecodable_line(undecodable) == "broker-a:0@9 does not decode (bad)" and not undecodable["redriven"]


@pytest.mark.parametrize("stored, ns", [
    ("%RETRY%G_Orders", None),             # a POP retry topic, V1 naming
    ("%RETRY%G+Orders", None),             # V2
    ("Orders", None),                      # what a broker that keeps the original topic stores
    ("%RETRY%ns%G_ns%Orders", "ns"),       # under a namespace
])
def test_a_dead_letter_from_a_pop_retry_topic_names_its_original_topic(stored: str, ns: str | None) -> None:
    from rmqrun.pull.dead_letters import origin_topic
    dlq = f"%DLQ%{'ns%' if ns else ''}G"
    msg = Message(dlq, b"x", {"RETRY_TOPIC": stored})
    assert origin_topic(msg, ns) == "Orders"
    wire = f"{'ns%' if ns else ''}Orders"
    assert DlqFilter(topics=frozenset({wire})).matches(msg)
    assert not DlqFilter(topics=frozenset({stored})).matches(msg) or stored == wire


def test_the_push_retry_topic_stays_what_it_is() -> None:
    from rmqrun.pull.dead_letters import origin_topic
    assert origin_topic(Message("%DLQ%G", b"x", {"RETRY_TOPIC": "%RETRY%G"})) == "%RETRY%G"
    assert origin_topic(Message("%DLQ%G", b"x", {})) is None


def test_a_send_back_names_the_original_topic_of_a_pop_retry_message() -> None:
    from rmqrun.consumer.retry import origin_of
    assert origin_of("%RETRY%G_Orders", "G") == "Orders"
    assert origin_of("%RETRY%G+Orders", "G") == "Orders"
    assert origin_of("Orders", "G") == "Orders"
    assert origin_of("%RETRY%G", "G") == "%RETRY%G"
