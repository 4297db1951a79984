"""The source's column decoder (:mod:`rmqrun.spark.columns`) against the per-message path it replaced.

The old rows were ``to_arrow`` over the messages a pull gave (``AsyncPullConsumer._result``, then
``read_range``'s bounds); the decoder must give the same Arrow batch value for value, for every kind
of record a broker sends: properties with keys, tags and unicode, an empty body, 5.x-style properties
(a trailing separator), a message without a UNIQ_KEY (its offset id), IPv6 hosts, a compressed body,
real 4.9.8 pull answers, a namespace, a tag filter, offsets before and past the range.
"""

from __future__ import annotations

import zlib

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


@pytest.mark.parametrize("damage", ["props_utf8", "total", "magic", "truncated"])
def test_a_record_that_does_not_decode_fails_as_a_pull_does(damage: str) -> None:
    good = _record(1)
    if damage == "props_utf8":
        bad = _record(2, props="TAGS\x01\u00ff").replace("ÿ".encode(), b"\xff")
    elif damage == "total":  # claims more bytes than the answer holds
        bad = (len(_record(2)) + 5).to_bytes(4, "big") + _record(2)[4:]
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
