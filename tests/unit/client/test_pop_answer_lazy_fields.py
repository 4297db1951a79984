"""A popped message's tags and first pop time are read from its record when first asked for, not as the
answer is decoded (``PoppedMessage``), and the client's batch-ack body is built in one pass
(``protocol.pop.build_batch_acks`` through ``batch_ack_words``) and its pop headers once per assignment: each must say what the eager
code said. Records written by a real Apache broker (the 4.9.8 captures) are read as the full decoder reads
them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rmqrun.client.pop_api import PopClient, PoppedMessage, pop_result_from_response
from rmqrun.protocol.pop import ReceiptHandle
from rmqrun.protocol.pop_batch_ack import build_batch_acks, decode_batch_ack_body, encode_bitset
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.message import decode_messages, encode_stored
from tests import captures

GROUP = "CG_lazy"


def _answer(body: bytes, **ext: str) -> RemotingCommand:
    fields = {"popTime": "1795500243867", "invisibleTime": "60000", "reviveQid": "3", "restNum": "0"}
    fields.update(ext)
    return RemotingCommand(ResponseCode.SUCCESS, fields, body=body)


@captures.requires_captures
def test_records_a_java_broker_wrote_pop_with_the_tags_and_counts_the_full_decoder_reads() -> None:
    """Every pulled body of the 4.9.8 captures, handed back as a pop answer: each message's topic, queue,
    offset, reconsume count and tags are what decode_messages reads, the record goes on byte for byte, and a
    record without 1ST_POP_TIME has this pop's time."""
    bodies = [f.body for f in captures.responses_to(RequestCode.PULL_MESSAGE) if f["code"] == 0 and f.body]
    assert bodies, "the captures hold pulled messages"
    checked = tagged = 0
    for body in bodies:
        full = decode_messages(body)
        result = pop_result_from_response(_answer(body), group=GROUP, broker_name="broker-a")
        assert len(result.messages) == len(full)
        assert b"".join(bytes(m.record) for m in result.messages) == body, "records go on as the broker sent them"
        for popped, msg in zip(result.messages, full):
            assert (popped.topic, popped.queue_id, popped.queue_offset, popped.reconsume_times) == \
                (msg.topic, msg.queue_id, msg.queue_offset, msg.reconsume_times)
            assert popped.tags == msg.properties.get("TAGS")
            assert popped.first_pop_time == 1795500243867
            checked += 1
            tagged += popped.tags is not None
    assert checked and tagged, "the captures hold tagged messages"


def test_a_tags_value_that_is_not_utf8_pops_and_says_so_only_when_read() -> None:
    """The answer decodes (the record still goes to a worker, which reports it undecodable); reading its
    tags raises a clear error naming the property. Set fields read back as set."""
    rec = bytearray(encode_stored(topic="T", body=b"x", queue_id=0, queue_offset=3, properties={"TAGS": "AB"}))
    at = rec.find(b"TAGS\x01AB")
    rec[at + 5:at + 7] = b"\xff\xfe"
    (msg,) = pop_result_from_response(_answer(bytes(rec), startOffsetInfo="0 0 3"), group=GROUP,
                                      broker_name="b").messages
    assert msg.receipt.encode() == "3 1795500243867 60000 3 0 b 0 3" and bytes(msg.record) == bytes(rec)
    with pytest.raises(ProtocolError, match="TAGS is not UTF-8"):
        msg.tags
    msg.tags = "X"
    assert msg.tags == "X"


def test_1st_pop_time_is_read_when_asked_and_a_bad_one_falls_back_to_the_pops_time() -> None:
    """A record with none, or one that is not a number, was first popped by this pop."""
    good = encode_stored(topic="T", body=b"a", queue_id=0, queue_offset=0, properties={"1ST_POP_TIME": "17"})
    bad = encode_stored(topic="T", body=b"b", queue_id=0, queue_offset=1, properties={"1ST_POP_TIME": "x1"})
    none = encode_stored(topic="T", body=b"c", queue_id=0, queue_offset=2, properties={"KEYS": "k"})
    msgs = pop_result_from_response(_answer(bytes(good) + bytes(bad) + bytes(none), startOffsetInfo="0 0 0"),
                                    group=GROUP, broker_name="b").messages
    assert [m.first_pop_time for m in msgs] == [17, 1795500243867, 1795500243867]
    moved = msgs[0].with_record(memoryview(b"other"), "T2")
    assert (moved.topic, bytes(moved.record), moved.receipt, moved.first_pop_time, moved.tags) == \
        ("T2", b"other", msgs[0].receipt, 17, None)


def _r(start: int, offset: int, *, pop_time: int = 100, flag: str = "0", queue: int = 1, it: int = 60_000,
       rq: int = 3) -> ReceiptHandle:
    return ReceiptHandle(start, pop_time, it, rq, flag, "b", queue, offset)


def _reference_entries(group: str, topic: str, receipts: list[ReceiptHandle]) -> list[dict[str, object]]:
    """The batch ack entries worked out the plain way, as the oracle: receipts grouped per checkpoint (retry flag,
    queue, ck start offset, pop time) in order of first appearance, each group's acked indexes as a set, written
    with encode_bitset under fastjson's sorted short names."""
    groups: dict[tuple[str, int, int, int], tuple[ReceiptHandle, set[int]]] = {}
    for r in receipts:
        groups.setdefault((r.retry_flag, r.queue_id, r.ck_start_offset, r.pop_time), (r, set()))[1].add(
            r.queue_offset - r.ck_start_offset)
    return [{"b": encode_bitset(bits), "c": group, "it": f.invisible_time, "pt": f.pop_time, "q": f.queue_id,
             "r": f.retry_flag, "rq": f.revive_qid, "so": f.ck_start_offset, "t": topic}
            for f, bits in groups.values()]


def _entries(group: str, topic: str, receipts: list[ReceiptHandle]) -> list[dict[str, object]]:
    """The entries the client writes: build_batch_acks (batch_ack_words' checkpoints) as BatchAck.to_json."""
    return [a.to_json() for a in build_batch_acks(group, topic, receipts)]


def test_the_one_pass_batch_ack_says_what_build_batch_acks_says() -> None:
    """Checkpoints of several queues, retry flags and pop times, offsets with gaps and out of order: the
    same entries, in the same order, as the plain per-receipt grouping; decoded back,
    the same offsets acked."""
    receipts = [_r(10, 12), _r(10, 10), _r(5, 5, queue=2), _r(10, 75), _r(10, 11, pop_time=200),
                _r(0, 3, flag="1", it=30_000, rq=7), _r(10, 13)]
    one_pass = _entries(GROUP, "T", receipts)
    assert one_pass == _reference_entries(GROUP, "T", receipts)
    _, acks = decode_batch_ack_body(b'{"acks":' + __import__("json").dumps(one_pass).encode() + b"}")
    assert sorted((a.retry, a.queue_id, a.pop_time, o) for a in acks for o in a.offsets) == sorted(
        (r.retry_flag, r.queue_id, r.pop_time, r.queue_offset) for r in receipts)
    with pytest.raises(ValueError, match="before its checkpoint"):
        _entries(GROUP, "T", [_r(10, 9)])


def test_one_checkpoints_run_of_offsets_is_acked_as_the_general_path_acks_it() -> None:
    """The usual batch ack (one checkpoint, its offsets without a gap, in any order) is worked out from the
    offsets' min, max and count: each case says what the plain per-receipt grouping says, and what only looks like one
    checkpoint's run (a gap, another queue, pop time or retry flag) still acks exactly its own offsets."""
    cases = [
        [_r(10, o) for o in (12, 10, 11, 13)],  # a run, out of order
        [_r(10, o) for o in (14, 15, 16)],  # a run that starts after the checkpoint's start
        [_r(10, 10)],
        [_r(10, o) for o in (10, 11, 11, 12)],  # the same offset twice
        [_r(10, o) for o in (10, 12, 13)],  # a gap
        [_r(10, 10), _r(10, 11, queue=2)],
        [_r(10, 10), _r(10, 11, pop_time=200)],
        [_r(10, 10), _r(10, 11, flag="1")],
        [_r(10, 10), _r(11, 11)],
    ]
    for receipts in cases:
        assert _entries(GROUP, "T", receipts) == _reference_entries(GROUP, "T", receipts)
    (run,) = _entries(GROUP, "T", cases[1])
    _, (ack,) = decode_batch_ack_body(b'{"acks":[' + __import__("json").dumps(run).encode() + b"]}")
    assert ack.offsets == [14, 15, 16]
    with pytest.raises(ValueError, match="before its checkpoint"):
        _entries(GROUP, "T", [_r(10, 9), _r(10, 10)])
    assert _entries(GROUP, "T", []) == []


def test_each_popped_message_has_its_records_store_time() -> None:
    """Read with the answer (the job's store-to-handler latency reads it there, not from the record again):
    the same as the record reader's, for IPv4 and IPv6 hosts, and 0 for a record stored without one."""
    from rmqrun.consumer.oldest import store_timestamp_ms
    recs = [bytes(encode_stored(topic="T", body=b"x" * n, queue_id=0, queue_offset=3 + i, store_timestamp=stamp,
                                born_host=born, store_host=host))
            for i, (n, stamp, born, host) in enumerate([
                (5, 1_700_000_000_123, "127.0.0.1:5", "127.0.0.1:10911"),
                (0, 1_700_000_000_456, "[::1]:5", "127.0.0.1:10911"),
                (9, 1_700_000_000_789, "127.0.0.1:5", "[::1]:10911"),
                (1, 0, "127.0.0.1:5", "127.0.0.1:10911")])]
    result = pop_result_from_response(_answer(b"".join(recs), startOffsetInfo="0 0 3"), group=GROUP,
                                      broker_name="b")
    assert [m.stored for m in result.messages] == [1_700_000_000_123, 1_700_000_000_456, 1_700_000_000_789, 0]
    assert [m.stored for m in result.messages[:3]] == [store_timestamp_ms(m.record) for m in result.messages[:3]]
    moved = result.messages[1].with_record(memoryview(b"other"), "T2")
    assert moved.stored == 1_700_000_000_456


class _Broker:
    def __init__(self) -> None:
        self.sent: list[dict[str, str]] = []

    async def request(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        self.sent.append(dict(cmd.ext_fields))
        cmd.ext_fields["spoiled"] = "1"  # what a caller does to its own copy must not reach the next pop
        return RemotingCommand(ResponseCode.POLLING_TIMEOUT, {})


def test_a_pops_header_is_built_once_per_settings_and_each_pop_has_its_own_born_time(monkeypatch: Any) -> None:
    broker = _Broker()
    client = PopClient(broker)  # type: ignore[arg-type]
    clock = iter([1000.0, 1001.0, 1002.0])
    monkeypatch.setattr("rmqrun.client.pop_api.time.time", lambda: next(clock))

    async def main() -> None:
        await client.pop("a", group=GROUP, topic="T", broker_name="b", invisible_time_ms=5000, poll_time_ms=0)
        await client.pop("a", group=GROUP, topic="T", broker_name="b", invisible_time_ms=5000, poll_time_ms=0)
        await client.pop("a", group=GROUP, topic="T", broker_name="b", invisible_time_ms=9000, poll_time_ms=0,
                         exp_type="TAG", exp="A||B")
    asyncio.run(main())
    first, second, third = broker.sent
    assert [f["bornTime"] for f in (first, second, third)] == ["1000000", "1001000", "1002000"]
    assert "spoiled" not in second, "each pop sends a copy of the assignment's header"
    assert (first["invisibleTime"], third["invisibleTime"], third["exp"], third["expType"]) == \
        ("5000", "9000", "A||B", "TAG") and "exp" not in first
    assert list(first) == list(second), "the same fields in the same order"


def test_a_popped_message_built_by_hand_keeps_what_it_was_given() -> None:
    r = _r(1, 1)
    msg = PoppedMessage(memoryview(b""), "T", "T", r, 2, 55, "tg", 4)
    assert (msg.first_pop_time, msg.tags, msg.order_count, msg.queue_id, msg.queue_offset) == (55, "tg", 4, 1, 1)
