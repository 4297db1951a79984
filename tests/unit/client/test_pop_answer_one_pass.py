"""The usual pop answer is read in one pass (``pop_api._plain_records``); anything else goes through the
general reader (``pop_api._records``). Both must give the same messages, and every answer the one-pass
reader does not take whole (IPv6 hosts, a record of the pop retry topic, another topic, a queue without a
``startOffsetInfo`` entry, a bad length, mixed record versions) must come out as the general reader has it,
errors included."""

from __future__ import annotations

from typing import Any

import pytest

from rmqrun.client import pop_api
from rmqrun.client.pop_api import pop_result_from_response
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.message import MAGIC_V1, MAGIC_V2, encode_stored

GROUP = "CG_one_pass"
TOPIC = "OnePassT"
HEADER = {"popTime": "1795500243867", "invisibleTime": "60000", "reviveQid": "3", "restNum": "0"}


def _rec(offset: int, *, queue: int = 0, topic: str = TOPIC, v2: bool = False, **kw: Any) -> bytes:
    raw = bytearray(encode_stored(topic=topic, body=b"b%d" % offset * (offset % 5), queue_id=queue,
                                  queue_offset=offset, store_timestamp=1_700_000_000_000 + offset,
                                  reconsume_times=offset % 3, **kw))
    if v2:  # the same record with a 2-byte topic length (MessageVersion V2)
        at = 88 + int.from_bytes(raw[84:88], "big")
        raw[at:at + 1] = len(topic).to_bytes(2, "big")
        raw[0:4] = len(raw).to_bytes(4, "big")
        raw[4:8] = MAGIC_V2.to_bytes(4, "big", signed=True)
    else:
        assert int.from_bytes(raw[4:8], "big", signed=True) == MAGIC_V1
    return bytes(raw)


def _answer(records: list[bytes], starts: str | None = "0 0 10;0 1 20") -> RemotingCommand:
    ext = dict(HEADER)
    if starts is not None:
        ext["startOffsetInfo"] = starts
    return RemotingCommand(ResponseCode.SUCCESS, ext, body=b"".join(records))


def _seen(messages: list[Any]) -> list[tuple[Any, ...]]:
    return [(bytes(m.record), m.topic, m.ack_topic, m.receipt, m.reconsume_times, m.stored, m.tags,
             m.first_pop_time, m.order_count) for m in messages]


def _general(resp: RemotingCommand) -> list[tuple[Any, ...]]:
    from rmqrun.protocol.pop import PopMessageResponseHeader
    header = PopMessageResponseHeader.from_ext(resp.ext_fields)
    return _seen(pop_api._records(bytes(resp.body or b""), header, GROUP, "broker-a"))


def _one_pass(resp: RemotingCommand) -> list[Any] | None:
    from rmqrun.protocol.pop import PopMessageResponseHeader
    header = PopMessageResponseHeader.from_ext(resp.ext_fields)
    return pop_api._plain_records(bytes(resp.body or b""), header, "broker-a")


def test_the_usual_answer_is_read_in_one_pass_as_the_general_reader_reads_it() -> None:
    cases = [
        [_rec(10 + i, properties={"TAGS": "A", "UNIQ_KEY": f"K{i}"}) for i in range(5)]
        + [_rec(20 + i, queue=1, properties={"1ST_POP_TIME": "1795500000000"}) for i in range(3)],
        [_rec(10 + i, v2=True, properties={"TAGS": "B"}) for i in range(4)],
        [_rec(12)],
        [_rec(10, properties={}), _rec(20, queue=1), _rec(11)],  # a queue comes back: its start again
    ]
    for records in cases:
        resp = _answer(records)
        fast = _one_pass(resp)
        assert fast is not None, "a usual answer takes the one pass"
        assert _seen(fast) == _general(resp)
        result = pop_result_from_response(resp, group=GROUP, broker_name="broker-a")
        assert _seen(result.messages) == _general(resp)
        assert result.plain_topic == TOPIC, "the answer says its messages are one topic's, acked under it"
    first = _one_pass(_answer(cases[0]))[0]  # type: ignore[index]
    assert (first.receipt.ck_start_offset, first.receipt.queue_offset, first.stored) == (10, 10, 1_700_000_000_010)


def test_what_the_one_pass_does_not_take_whole_comes_out_as_the_general_reader_has_it() -> None:
    ck = "2 1795500000000 60000 1 1 broker-a 0 4"
    usual = [_rec(10), _rec(11)]
    cases = {
        "an IPv6 born host": usual + [_rec(12, born_host="[::1]:5")],
        "an IPv6 store host": [_rec(10, store_host="[::1]:10911")] + usual[1:],
        "a record of the pop retry topic": usual + [_rec(4, properties={"POP_CK": ck})],
        "another topic": usual + [_rec(12, topic="OtherT")],
        "a topic of the same length": usual + [_rec(12, topic=TOPIC[::-1])],
        "mixed record versions": usual + [_rec(12, v2=True)],
        "a queue without startOffsetInfo and none at all": usual,
    }
    for what, records in cases.items():
        resp = _answer(records, None if "none at all" in what else "0 0 10;0 1 20")
        assert _one_pass(resp) is None, what
        result = pop_result_from_response(resp, group=GROUP, broker_name="broker-a")
        assert _seen(result.messages) == _general(resp), what
        assert result.plain_topic is None, f"{what}: the consumer looks at each message's topic and flag"
    retried = pop_result_from_response(_answer(cases["a record of the pop retry topic"]), group=GROUP,
                                       broker_name="broker-a").messages[-1]
    assert retried.receipt.encode() == ck and retried.ack_topic == f"%RETRY%{GROUP}_{TOPIC}"


def test_a_bad_answer_the_one_pass_leaves_gets_the_general_readers_error() -> None:
    usual = [_rec(10), _rec(11)]
    props_len_wrong = bytearray(_rec(12, properties={"TAGS": "A"}))
    props_len_wrong[-len(b"TAGS\x01A") - 2:-len(b"TAGS\x01A")] = (len(b"TAGS\x01A") + 1).to_bytes(2, "big")
    negative = bytearray(_rec(13, properties={"TAGS": "A"}))
    negative[-len(b"TAGS\x01A") - 2:-len(b"TAGS\x01A")] = b"\xff\xf9"
    short = bytearray(_rec(14, properties={"K": "v"}))  # properties past a short's range: a negative length
    huge = short[:-len(b"K\x01v") - 2] + (40_002).to_bytes(2, "big") + b"K\x01" + b"x" * 40_000
    huge[0:4] = len(huge).to_bytes(4, "big")
    cases = {
        "no startOffsetInfo for retry flag 0 queue 2": usual + [_rec(30, queue=2)],
        "do not add up  ": usual + [bytes(huge)],
        "truncated|claims": usual + [_rec(12)[:60]],
        "do not add up": usual + [bytes(props_len_wrong)],
        "do not add up ": usual + [bytes(negative)],
    }
    for error, records in cases.items():
        resp = _answer(records)
        assert _one_pass(resp) is None, error
        with pytest.raises(ProtocolError, match=error.strip()):
            pop_result_from_response(resp, group=GROUP, broker_name="broker-a")
