"""The source's column decoder (:mod:`rmqrun.spark.columns`) against the per-message path it replaced.

The old rows were ``to_arrow`` over the messages a pull gave (``AsyncPullConsumer._result``, then
``read_range``'s bounds); the decoder must give the same Arrow batch value for value, for every kind
of record a broker sends: properties with keys, tags and unicode, an empty body, 5.x-style properties
(a trailing separator), a message without a UNIQ_KEY (its offset id), IPv6 hosts, a compressed body,
real 4.9.8 pull answers, a namespace, a tag filter, offsets before and past the range.
"""

from __future__ import annotations

import concurrent.futures
import zlib
from typing import Any

import pytest

from rmqrun.client.broker import PullResult as WirePullResult
from rmqrun.model import MessageQueue
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.pull import PullStatus
from rmqrun.pull.async_consumer import AsyncPullConsumer
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.message import SYSFLAG_COMPRESSED, encode_stored
from rmqrun.remoting.codes import RequestCode
from rmqrun.spark.columns import ColumnRows
from rmqrun.spark.schema import arrow_schema, to_arrow
from tests import captures
from tests.captures import requires_captures

MQ = MessageQueue("TopicCols", "broker-x", 3)


def _record(offset: int, body: bytes = b"hello", props: str | dict[str, str] | None = None, **kw: object) -> bytes:
    if props is None:
        props = {"UNIQ_KEY": f"C0A80001{offset:024X}", "TAGS": "TagA", "KEYS": "k1 k2", "WAIT": "true"}
    fields = dict(topic="TopicCols", body=body, properties=props, queue_id=7, queue_offset=offset,
                  commit_log_offset=1000 + offset * 300, born_timestamp=1_700_000_000_123 + offset,
                  store_timestamp=1_700_000_000_456 + offset, reconsume_times=offset % 3,
                  born_host="10.0.0.1:50000", store_host="10.0.0.2:10911", flag=5)
    fields.update(kw)
    return bytes(encode_stored(**fields))  # type: ignore[arg-type]


def _mixed_body() -> bytes:
    return b"".join([
        _record(10),
        _record(11, "日本語 body ✓".encode(), {"UNIQ_KEY": "AB12", "TAGS": "TagB", "KEYS": "ключ", "uni": "ü→€"}),
        _record(12, b""),                                                # an empty body
        _record(13, props="UNIQ_KEY\x01FF00\x02TAGS\x01TagA\x02a\x01b\x02"),  # 5.x: a trailing separator
        _record(14, props={"TAGS": "TagA"}),                              # no UNIQ_KEY: the offset id
        _record(15, props=""),                                            # no properties at all
        _record(16, born_host="[::1]:40000", store_host="[fe80::2]:10911"),  # IPv6 hosts
        _record(17, zlib.compress(b"z" * 500), sys_flag=SYSFLAG_COMPRESSED),  # a compressed body
        _record(18, b"x" * 3000, topic="T" * 200),                        # a long topic (magic V2)
        _record(19),
    ])


def _old(body: bytes, sub: SubscriptionData, start: int, end: int, namespace: str | None = None,
         mq: MessageQueue = MQ):  # type: ignore[no-untyped-def]
    wire = WirePullResult(PullStatus.FOUND, end, 0, end, 0, body)
    res = AsyncPullConsumer._result(mq, start, sub, wire, namespace)
    msgs = []
    for m in res.messages:  # read_range's bounds
        if m.queue_offset >= end:
            break
        if m.queue_offset >= start:
            msgs.append(m)
    return to_arrow(msgs, arrow_schema())


def _new(body: bytes, sub: SubscriptionData, start: int, end: int, namespace: str | None = None,
         mq: MessageQueue = MQ):  # type: ignore[no-untyped-def]
    rows = ColumnRows(namespace)
    rows.add(body, mq, sub, start, end)
    return rows.batch(arrow_schema())


def _sub(expr: str = "*", topic: str = "TopicCols") -> SubscriptionData:
    return SubscriptionData.build(topic, expr, "TAG", sub_version=0)


@pytest.mark.parametrize("expr,start,end", [("*", 0, 100), ("TagA", 0, 100), ("TagB || TagA", 12, 17),
                                            ("*", 13, 14), ("Nope", 0, 100)])
def test_rows_are_the_old_paths_rows_value_for_value(expr: str, start: int, end: int) -> None:
    body = _mixed_body()
    new, old = _new(body, _sub(expr), start, end), _old(body, _sub(expr), start, end)
    assert new.num_rows == old.num_rows
    assert new.to_pylist() == old.to_pylist()
    assert new.equals(old)


def test_every_kind_of_record_is_read() -> None:
    rows = _new(_mixed_body(), _sub(), 0, 100).to_pylist()
    assert [r["queue_offset"] for r in rows] == list(range(10, 20))
    assert {r["queue_id"] for r in rows} == {3} and {r["broker"] for r in rows} == {"broker-x"}
    by = {r["queue_offset"]: r for r in rows}
    assert by[11]["body"] == "日本語 body ✓".encode() and by[11]["keys"] == "ключ" and by[11]["msg_id"] == "AB12"
    assert dict(by[11]["properties"])["uni"] == "ü→€"
    assert by[12]["body"] == b""
    assert by[13]["msg_id"] == "FF00" and dict(by[13]["properties"]) == {"UNIQ_KEY": "FF00", "TAGS": "TagA",
                                                                           "a": "b"}
    assert by[14]["msg_id"] == "0A00000200002A9F" + f"{1000 + 14 * 300:016X}"
    assert by[15]["properties"] == [] and by[15]["tags"] is None
    assert by[17]["body"] == b"z" * 500
    assert by[18]["topic"] == "T" * 200
    assert by[10]["reconsume_times"] == 1 and by[10]["tags"] == "TagA" and by[10]["keys"] == "k1 k2"


def test_a_namespace_is_taken_off_the_topic_as_a_pull_does() -> None:
    body = b"".join(_record(i, topic="ns1%TopicCols") for i in range(3))
    new, old = _new(body, _sub(topic="ns1%TopicCols"), 0, 9, "ns1"), _old(body, _sub(topic="ns1%TopicCols"), 0, 9,
                                                                          "ns1")
    assert new.equals(old)
    assert new.column("topic").to_pylist() == ["TopicCols"] * 3


@requires_captures
def test_real_4_9_8_pull_answers_read_as_before() -> None:
    frames = [f for f in captures.responses_to(RequestCode.PULL_MESSAGE) if f["code"] == 0 and f.body]
    assert frames, "the captures hold found pulls"
    for frame in frames:
        req = captures.request_of(frame)
        assert req is not None
        fields = req["header"]["extFields"]
        mq = MessageQueue(fields["topic"], "broker-a", int(fields["queueId"]))
        sub = _sub(topic=mq.topic)
        new, old = _new(frame.body, sub, 0, 1 << 60, mq=mq), _old(frame.body, sub, 0, 1 << 60, mq=mq)
        assert new.num_rows > 0
        assert new.equals(old), frame


def test_a_record_past_the_end_ends_the_range_and_is_left_out() -> None:
    rows = ColumnRows()
    assert rows.add(_mixed_body(), MQ, _sub(), 0, 15) is True
    assert rows.offsets == [10, 11, 12, 13, 14]
    assert ColumnRows().add(_mixed_body(), MQ, _sub(), 0, 20) is False


@pytest.mark.parametrize("damage", ["props_utf8", "total", "slack", "magic", "truncated"])
def test_a_record_that_does_not_decode_fails_as_a_pull_does(damage: str) -> None:
    good = _record(1)
    if damage == "props_utf8":
        bad = _record(2, props="TAGS\x01\u00ff").replace("ÿ".encode(), b"\xff")
    elif damage == "total":  # claims more bytes than the answer holds
        bad = (len(_record(2)) + 5).to_bytes(4, "big") + _record(2)[4:]
    elif damage == "slack":  # claims 3 bytes more than its fields, and they are there: not a record
        rec = _record(2)
        bad = (len(rec) + 3).to_bytes(4, "big") + rec[4:] + b"\0\0\0" + _record(3)
    elif damage == "magic":
        bad = _record(2)[:4] + b"\x00\x00\x00\x01" + _record(2)[8:]
    else:
        bad = _record(2)[:-3]
    body = good + bad
    with pytest.raises(ProtocolError) as old_err:
        _old(body, _sub(), 0, 100)
    with pytest.raises(ProtocolError) as new_err:
        _new(body, _sub(), 0, 100)
    assert str(new_err.value) == str(old_err.value)
    assert str(new_err.value).startswith(f"pull of {MQ} from offset 0: a message does not decode")


def test_only_ipv6_and_compressed_records_leave_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    import rmqrun.spark.columns as columns

    slow: list[int] = []
    real = columns.decode_message

    def spy(data, pos, **kw):  # type: ignore[no-untyped-def]
        msg, end = real(data, pos, **kw)
        slow.append(msg.queue_offset)
        return msg, end

    monkeypatch.setattr(columns, "decode_message", spy)
    assert _new(_mixed_body(), _sub(), 0, 100).num_rows == 10
    assert slow == [16, 17]


class _TaggedQueueWire:
    """One queue of tagged records answering undecoded pulls as a broker filters them: it scans past
    ``max_nums`` entries until that many match, so an answer can hold offsets past the ones asked for."""

    namespace = None

    def __init__(self, tags: list[str]) -> None:
        self.tags = tags

    def pull_undecoded(self, q, tags, offset, max_nums=32):  # type: ignore[no-untyped-def]
        end = len(self.tags)
        sub = _sub(tags)
        if offset >= end:
            return WirePullResult(PullStatus.NO_NEW_MSG, offset, 0, end, 0), sub
        wanted = {t.strip() for t in tags.split("||")}
        picked = [o for o in range(offset, end) if tags == "*" or self.tags[o] in wanted][:max_nums]
        if not picked:
            return WirePullResult(PullStatus.NO_MATCHED_MSG, end, 0, end, 0), sub
        next_begin = picked[-1] + 1 if len(picked) == max_nums else end
        body = b"".join(_record(o, props={"TAGS": self.tags[o]}) for o in picked)
        return WirePullResult(PullStatus.FOUND, next_begin, 0, end, 0, body), sub


def test_a_tag_filtered_range_keeps_what_the_broker_scanned_past_its_end_out() -> None:
    from rmqrun.spark.pulling import read_range_columns
    from rmqrun.spark.ranges import QueueRange

    queue = _TaggedQueueWire(["B", "B", "B", "B", "A", "A", "B", "A", "B"])

    def offsets(r: QueueRange, batch_size: int = 32) -> list[int]:
        rows = ColumnRows()
        for _ in read_range_columns(queue, r, lambda: rows, "A", batch_size=batch_size):
            pass
        return rows.offsets

    assert offsets(QueueRange("TopicCols", "broker-a", 0, 0, 5)) == [4]
    assert offsets(QueueRange("TopicCols", "broker-a", 0, 5, 9)) == [5, 7]
    for cut in range(1, 9):
        got = [o for r in (QueueRange("TopicCols", "broker-a", 0, 0, cut), QueueRange("TopicCols", "broker-a", 0, cut, 9))
               for o in offsets(r, batch_size=2)]
        assert got == [4, 5, 7], cut


def test_a_range_past_the_queue_s_end_fails_the_read_as_before() -> None:
    from rmqrun.spark.errors import SourceError
    from rmqrun.spark.pulling import read_range_columns
    from rmqrun.spark.ranges import QueueRange

    rows = ColumnRows()
    with pytest.raises(SourceError, match="before the planned end 20"):
        for _ in read_range_columns(_TaggedQueueWire(["A"] * 5), QueueRange("TopicCols", "b", 0, 0, 20),
                                    lambda: rows):
            pass
    assert rows.offsets == [0, 1, 2, 3, 4]


class _CappedQueueWire(_TaggedQueueWire):
    """Untagged records, at most ``cap`` per answer (a broker's transfer limit), offsets ``lost`` before
    ``min_offset``; pulls may be sent ahead (futures), and every pull is recorded."""

    def __init__(self, n: int, cap: int, min_offset: int = 0) -> None:
        super().__init__(["T"] * n)
        self.cap, self.min_offset = cap, min_offset
        self.asked: list[int] = []
        self.sent_ahead: list[Any] = []

    def pull_undecoded(self, q, tags, offset, max_nums=32):  # type: ignore[no-untyped-def]
        self.asked.append(offset)
        if offset < self.min_offset:
            return WirePullResult(PullStatus.OFFSET_ILLEGAL, self.min_offset, self.min_offset, len(self.tags), 0), \
                _sub(tags)
        return super().pull_undecoded(q, tags, offset, min(max_nums, self.cap))

    def pull_undecoded_later(self, q, tags, offset, max_nums=32):  # type: ignore[no-untyped-def]
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        future.set_result(self.pull_undecoded(q, tags, offset, max_nums))
        self.sent_ahead.append(future)
        return future


def _read_all(queue: Any, r: Any, batch_size: int) -> list[int]:
    from rmqrun.spark.pulling import read_range_columns

    rows = ColumnRows()
    for _ in read_range_columns(queue, r, lambda: rows, "*", fail_on_data_loss=False, batch_size=batch_size):
        pass
    return rows.offsets


def test_pulls_sent_ahead_read_every_offset_once_and_learn_the_broker_s_cap() -> None:
    from rmqrun.spark.ranges import QueueRange

    queue = _CappedQueueWire(1000, cap=32)
    assert _read_all(queue, QueueRange("TopicCols", "b", 0, 3, 1000), batch_size=64) == list(range(3, 1000))
    assert queue.sent_ahead, "pulls went ahead"
    # one pull sent ahead for the wrong offset (before the cap was learned), then each answer's end is the next pull
    assert sorted(set(queue.asked)) == list(range(3, 1000, 32))
    assert len(queue.asked) == len(set(queue.asked)) + 1


def test_a_pull_sent_ahead_past_lost_offsets_is_dropped_and_the_range_goes_on_where_the_broker_says() -> None:
    from rmqrun.spark.ranges import QueueRange

    queue = _CappedQueueWire(300, cap=32, min_offset=100)
    assert _read_all(queue, QueueRange("TopicCols", "b", 0, 0, 300), batch_size=32) == list(range(100, 300))


def test_a_reader_that_stops_early_cancels_the_pull_it_sent_ahead() -> None:
    from rmqrun.spark.pulling import read_range_columns
    from rmqrun.spark.ranges import QueueRange

    queue = _CappedQueueWire(1000, cap=32)
    cancelled: list[bool] = []
    real_later = queue.pull_undecoded_later

    def later(*args: Any, **kw: Any) -> Any:
        future = real_later(*args, **kw)
        pending: concurrent.futures.Future[Any] = concurrent.futures.Future()
        pending.add_done_callback(lambda f: cancelled.append(f.cancelled()))
        return _Forward(pending, future)

    queue.pull_undecoded_later = later  # type: ignore[method-assign]
    rows = ColumnRows()
    it = read_range_columns(queue, QueueRange("TopicCols", "b", 0, 0, 1000), lambda: rows)
    next(it)
    next(it)
    it.close()
    assert rows.offsets == list(range(64))
    # the pulls read were answered, the one in flight when the reader stopped is cancelled
    assert cancelled == [False, True]


class _Forward:
    """A future whose answer is ``done``'s, and whose cancel cancels ``pending``."""

    def __init__(self, pending: Any, done: Any) -> None:
        self.pending, self.done = pending, done

    def result(self) -> Any:
        self.pending.set_result(None)
        return self.done.result()

    def cancel(self) -> bool:
        return self.pending.cancel()
