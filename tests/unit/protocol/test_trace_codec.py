"""The message-trace codec against the 4.9.8 Java TraceDataEncoder's own output.

``data/trace_java_4_9_8.jsonl`` was written by the Java encoder and decoder themselves
(``data/GenTraceCases.java``, see ``data/README.md``): random Pub, SubBefore and SubAfter contexts (nulls,
empty keys, several messages per consume context, non-ASCII tags and keys, the CLOUD channel's SubAfter),
the text Java wrote for each, its transfer keys, the KEYS of trace messages carrying it, and what Java's
decoder read back. Every LOCAL case must encode byte for byte as Java did; every case must decode as Java did.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmqrun.protocol.trace import (
    CONTENT_SPLITOR, FIELD_SPLITOR, ContextCode, MessageType, TraceBean, TraceContext, TraceTransfer, TraceType,
    decode_trace_data, encode_context, trace_keys,
)

CASES = [json.loads(line) for line in
         (Path(__file__).parent.parent / "data" / "trace_java_4_9_8.jsonl").read_text(encoding="utf-8").splitlines()]
LOCAL = [c for c in CASES if c["channel"] == "LOCAL"]


def _context(case: dict) -> TraceContext:
    beans = [TraceBean(msg_id=b["msg_id"], topic=b["topic"], tags=b["tags"], keys=b["keys"],
                       store_host=b["store_host"], body_length=b["body_length"], retry_times=b["retry_times"],
                       offset_msg_id=b["offset_msg_id"], msg_type=MessageType(b["msg_type"]))
             for b in case["beans"]]
    return TraceContext(TraceType(case["type"]), timestamp=case["timestamp"], region_id=case["region_id"],
                        group=case["group"], request_id=case["request_id"], cost_time=case["cost_time"],
                        success=case["success"], context_code=case["context_code"], beans=beans)


def test_the_vectors_cover_every_type_nulls_and_batches() -> None:
    assert {c["type"] for c in LOCAL} == {"Pub", "SubBefore", "SubAfter"}
    assert any(c["channel"] == "CLOUD" for c in CASES)
    assert any(b["keys"] is None for c in LOCAL for b in c["beans"])
    assert any(b["tags"] is None for c in LOCAL for b in c["beans"])
    assert any(len(c["beans"]) > 1 for c in LOCAL)
    assert len(LOCAL) >= 40


@pytest.mark.parametrize("case", LOCAL, ids=lambda c: c["type"])
def test_encode_writes_what_java_wrote(case: dict) -> None:
    transfer = encode_context(_context(case))
    assert transfer.data == case["data"]
    assert sorted(transfer.keys) == sorted(case["trans_keys"])
    assert trace_keys([transfer]) == case["keys_alone"]


@pytest.mark.parametrize("case", LOCAL, ids=lambda c: c["type"])
def test_keys_of_a_two_record_message_in_java_hash_set_order(case: dict) -> None:
    previous = TraceTransfer("", list(case["previous_keys"]))
    assert trace_keys([previous, encode_context(_context(case))]) == case["keys_after_previous"]


_CTX_FIELDS = {
    "Pub": ("timestamp", "region_id", "group", "cost_time", "success"),
    "SubBefore": ("timestamp", "region_id", "group", "request_id"),
    "SubAfter": ("request_id", "cost_time", "success", "context_code"),
}
_BEAN_FIELDS = {
    "Pub": ("topic", "msg_id", "tags", "keys", "store_host", "body_length", "msg_type", "offset_msg_id"),
    "SubBefore": ("msg_id", "retry_times", "keys"),
    "SubAfter": ("msg_id", "keys"),
}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f'{c["type"]}-{c["channel"]}')
def test_decode_reads_what_java_read(case: dict) -> None:
    got = decode_trace_data(case["data"])
    assert len(got) == len(case["decoded"])
    for ctx, want in zip(got, case["decoded"]):
        assert ctx.trace_type.value == want["type"]
        for name in _CTX_FIELDS[want["type"]]:
            assert getattr(ctx, name) == want[name], name
        if want["type"] == "SubAfter" and want["timestamp"] is not None:
            assert (ctx.timestamp, ctx.group) == (want["timestamp"], want["group"])
        bean = ctx.beans[0]
        for name in _BEAN_FIELDS[want["type"]]:
            assert getattr(bean, name) == want["bean"][name], name


def test_older_record_lengths_decode_as_java_reads_them() -> None:
    s = CONTENT_SPLITOR
    pub13 = s.join(["Pub", "5", "R", "G", "T", "ID", "tg", "k1", "h:1", "9", "3", "0", "false"]) + FIELD_SPLITOR
    pub15 = s.join(["Pub", "5", "R", "G", "T", "ID", "tg", "k1", "h:1", "9", "3", "3", "OFF", "true", "c:2"])
    after6 = s.join(["SubAfter", "REQ", "ID", "12", "false", "k"])
    got = decode_trace_data(pub13 + pub15 + FIELD_SPLITOR + after6)
    assert [c.trace_type for c in got] == [TraceType.PUB, TraceType.PUB, TraceType.SUB_AFTER]
    assert got[0].success is False and got[0].beans[0].offset_msg_id == ""
    assert (got[1].beans[0].offset_msg_id, got[1].success, got[1].beans[0].client_host) == ("OFF", True, "c:2")
    assert got[1].beans[0].msg_type is MessageType.DELAY
    assert (got[2].cost_time, got[2].success, got[2].context_code, got[2].group) == (12, False, 0, "")


def test_end_transaction_records_are_skipped_and_bad_ones_named() -> None:
    s = CONTENT_SPLITOR
    end_tx = s.join(["EndTransaction", "1", "R", "G", "T", "ID", "t", "k", "h", "1", "X", "COMMIT_MESSAGE", "false"])
    assert decode_trace_data(end_tx + FIELD_SPLITOR) == []
    assert decode_trace_data("") == []
    with pytest.raises(ValueError, match="malformed SubBefore"):
        decode_trace_data(s.join(["SubBefore", "notanumber", "R", "G", "Q", "ID", "0", "k"]))


def test_a_consume_context_writes_one_record_per_message_with_its_code() -> None:
    ctx = TraceContext(TraceType.SUB_AFTER, timestamp=7, group="G", request_id="Q", cost_time=4, success=False,
                       context_code=ContextCode.FAILED, beans=[TraceBean(msg_id="A", keys=None),
                                                               TraceBean(msg_id="B", keys="x y")])
    t = encode_context(ctx)
    assert t.data == ("SubAfter\x01Q\x01A\x014\x01false\x01null\x014\x017\x01G\x02"
                      "SubAfter\x01Q\x01B\x014\x01false\x01x y\x014\x017\x01G\x02")
    assert sorted(t.keys) == ["A", "B", "x", "y"]
    with pytest.raises(ValueError, match="EndTransaction"):
        encode_context(TraceContext(TraceType.END_TRANSACTION, beans=[TraceBean()]))
