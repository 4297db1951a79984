"""POP wire schema against the 5.3.3 Java classes: header names and encodings, receipts, the batch-ack body."""

from __future__ import annotations

import json

import pytest

from rmqrun import topic_names as N
from rmqrun.protocol import pop as P
from rmqrun.protocol import pop_batch_ack as PB
from rmqrun.protocol.header_codec import Header
from rmqrun.remoting.errors import MissingFieldError, ProtocolError

# One instance per header with the ext fields a Java peer sends for it (field names from the Java classes;
# primitive and Boolean-with-default fields are always present, as makeCustomHeaderToNet writes every non-null).
CASES: list[tuple[Header, dict[str, str]]] = [
    (P.PopMessageRequestHeader(consumer_group="G", topic="T", queue_id=-1, max_msg_nums=32, invisible_time=60000,
                               poll_time=15000, born_time=1795500243860, init_mode=0, exp_type="TAG", exp="*",
                               bname="broker-5x"),
     {"consumerGroup": "G", "topic": "T", "queueId": "-1", "maxMsgNums": "32", "invisibleTime": "60000",
      "pollTime": "15000", "bornTime": "1795500243860", "initMode": "0", "expType": "TAG", "exp": "*",
      "order": "false", "bname": "broker-5x"}),
    (P.PopMessageResponseHeader(pop_time=1795500243867, invisible_time=60000, revive_qid=0, rest_num=3,
                                start_offset_info="0 1 0", msg_offset_info="0 1 0,1"),
     {"popTime": "1795500243867", "invisibleTime": "60000", "reviveQid": "0", "restNum": "3",
      "startOffsetInfo": "0 1 0", "msgOffsetInfo": "0 1 0,1"}),
    (P.AckMessageRequestHeader(consumer_group="G", topic="%RETRY%G_T", queue_id=0,
                               extra_info="0 1795500566252 60000 1 1 broker-5x 0 0", offset=0),
     {"consumerGroup": "G", "topic": "%RETRY%G_T", "queueId": "0",
      "extraInfo": "0 1795500566252 60000 1 1 broker-5x 0 0", "offset": "0"}),
    (P.ChangeInvisibleTimeRequestHeader(consumer_group="G", topic="T", queue_id=1,
                                        extra_info="0 1795500243867 60000 0 0 broker-5x 1 0", offset=0,
                                        invisible_time=10000),
     {"consumerGroup": "G", "topic": "T", "queueId": "1", "extraInfo": "0 1795500243867 60000 0 0 broker-5x 1 0",
      "offset": "0", "invisibleTime": "10000"}),
    (P.ChangeInvisibleTimeResponseHeader(pop_time=1795500250000, invisible_time=10000, revive_qid=3),
     {"popTime": "1795500250000", "invisibleTime": "10000", "reviveQid": "3"}),
    (P.NotificationRequestHeader(consumer_group="G", topic="T", queue_id=-1, poll_time=20000, born_time=5,
                                 order=True, attempt_id="a1"),
     {"consumerGroup": "G", "topic": "T", "queueId": "-1", "pollTime": "20000", "bornTime": "5", "order": "true",
      "attemptId": "a1"}),
    (P.NotificationResponseHeader(has_msg=True), {"hasMsg": "true", "pollingFull": "false"}),
    (P.PollingInfoRequestHeader(consumer_group="G", topic="T", queue_id=2), {"consumerGroup": "G", "topic": "T",
                                                                             "queueId": "2"}),
    (P.PollingInfoResponseHeader(polling_num=4), {"pollingNum": "4"}),
]


@pytest.mark.parametrize("header,ext", CASES, ids=[type(h).__name__ for h, _ in CASES])
def test_header_both_ways(header: Header, ext: dict[str, str]) -> None:
    assert header.to_ext() == ext
    assert type(header).from_ext(ext) == header


@pytest.mark.parametrize("cls,missing", [
    (P.PopMessageRequestHeader, "invisibleTime"), (P.PopMessageRequestHeader, "initMode"),
    (P.AckMessageRequestHeader, "extraInfo"), (P.ChangeInvisibleTimeRequestHeader, "invisibleTime"),
    (P.PopMessageResponseHeader, "reviveQid"), (P.NotificationResponseHeader, "hasMsg"),
])
def test_required_fields_refused_when_missing(cls: type[Header], missing: str) -> None:
    full = dict(next(ext for h, ext in CASES if type(h) is cls))
    del full[missing]
    with pytest.raises(MissingFieldError, match=missing):
        cls.from_ext(full)


def test_pop_request_order_defaults_false_and_parses_true() -> None:
    ext = dict(CASES[0][1])
    del ext["order"]
    assert P.PopMessageRequestHeader.from_ext(ext).order is False
    ext["order"] = "true"
    assert P.PopMessageRequestHeader.from_ext(ext).order is True


# --------------------------------------------------------------------------- receipts

@pytest.mark.parametrize("text,fields", [
    ("0 1795500243867 60000 0 0 broker-5x 1 0", (0, 1795500243867, 60000, 0, "0", "broker-5x", 1, 0)),
    ("0 1795500566252 60000 1 1 broker-5x 0 0", (0, 1795500566252, 60000, 1, "1", "broker-5x", 0, 0)),
    ("17 5 300000 999 2 b 3 19", (17, 5, 300000, 999, "2", "b", 3, 19)),
])
def test_receipt_examples_round_trip(text: str, fields: tuple) -> None:
    r = P.ReceiptHandle.parse(text)
    assert (r.ck_start_offset, r.pop_time, r.invisible_time, r.revive_qid, r.retry_flag, r.broker_name,
            r.queue_id, r.queue_offset) == fields
    assert r.encode() == text == str(r)
    assert r.is_order == (fields[3] == 999)
    assert r.visible_at_ms == fields[1] + fields[2]


@pytest.mark.parametrize("bad", ["", "0 1 2 3 0 b 1", "0 1 2 3 0 b 1 2 3", "x 1 2 3 0 b 1 2", "0 1 2 3 7 b 1 2",
                                 "0 1 2 3 0 b q 2"])
def test_receipt_parse_refuses_bad_text(bad: str) -> None:
    with pytest.raises(ProtocolError, match="POP receipt"):
        P.ReceiptHandle.parse(bad)


def test_receipt_for_builds_what_process_pop_response_builds() -> None:
    # Two queues in one answer: queue 1 from ck offset 4 (messages 4, 6 after a tag filter), retry queue 0.
    header = P.PopMessageResponseHeader(pop_time=1795500243867, invisible_time=60000, revive_qid=5, rest_num=0,
                                        start_offset_info="0 1 4;1 0 0", msg_offset_info="0 1 4,6;1 0 0")
    r = P.receipt_for(header, broker_name="broker-5x", retry_flag="0", queue_id=1, queue_offset=6)
    assert r.encode() == "4 1795500243867 60000 5 0 broker-5x 1 6"
    r = P.receipt_for(header, broker_name="broker-5x", retry_flag="1", queue_id=0, queue_offset=0)
    assert r.encode() == "0 1795500243867 60000 5 1 broker-5x 0 0"
    with pytest.raises(ProtocolError, match="queue 3"):
        P.receipt_for(header, broker_name="b", retry_flag="0", queue_id=3, queue_offset=0)
    # A broker without startOffsetInfo: the first offset of the queue in the answer is the ck offset.
    bare = P.PopMessageResponseHeader(pop_time=1, invisible_time=2, revive_qid=0, rest_num=0)
    assert P.receipt_for(bare, broker_name="b", retry_flag="0", queue_id=0, queue_offset=9,
                         first_offset=7).encode() == "7 1 2 0 0 b 0 9"


def test_receipt_after_change_is_a_one_message_checkpoint() -> None:
    old = P.ReceiptHandle.parse("4 1000 60000 5 1 b 0 6")
    new = P.receipt_after_change(old, P.ChangeInvisibleTimeResponseHeader(pop_time=2000, invisible_time=10000,
                                                                          revive_qid=2))
    assert new.encode() == "6 2000 10000 2 1 b 0 6"


# --------------------------------------------------------------------------- offset infos

def test_offset_infos_encode_and_parse() -> None:
    starts = {("0", 1): 4, ("1", 0): 0}
    assert P.encode_start_offset_info(starts) == "0 1 4;1 0 0"
    assert P.parse_start_offset_info("0 1 4;1 0 0") == starts
    offsets = {("0", 1): [4, 6], ("2", 0): [3]}
    assert P.encode_msg_offset_info(offsets) == "0 1 4,6;2 0 3"
    assert P.parse_msg_offset_info("0 1 4,6;2 0 3") == offsets
    big = 1 << 40  # any iterable of offsets (the broker passes its checkpoint's tuple), any size of int
    assert P.encode_msg_offset_info({("0", 3): range(big, big + 3), ("1", 0): iter([])}) == \
        f"0 3 {big},{big + 1},{big + 2};1 0 "
    assert P.parse_start_offset_info(None) == {} and P.parse_msg_offset_info("") == {}
    # the broker's one pass over the queues a pop read gives both texts as the two encoders do
    reads = [("1", 0, 7, (7,)), ("0", 3, big, (big, big + 1, big + 2)), ("0", 1, 4, (4, 6))]
    assert P.encode_offset_infos(reads) == (
        P.encode_start_offset_info({(f, q): s for f, q, s, _ in reads}),
        P.encode_msg_offset_info({(f, q): o for f, q, _, o in reads})) == (
        f"1 0 7;0 3 {big};0 1 4", f"1 0 7;0 3 {big},{big + 1},{big + 2};0 1 4,6")
    assert P.encode_offset_infos([]) == ("", "")


def test_order_count_info_keys_by_offset_then_queue() -> None:
    counts = {("0", 1, 5): 2, ("0", 1, 6): 0, ("0", 1, None): 0}
    text = P.encode_order_count_info(counts)
    assert text == "0 qo1%5 2;0 qo1%6 0;0 1 0"
    assert P.parse_order_count_info(text) == counts
    assert P.order_count_for(counts, "0", 1, 5) == 2
    assert P.order_count_for({("0", 1, None): 3}, "0", 1, 9) == 3
    assert P.order_count_for({}, "0", 1, 9) is None


@pytest.mark.parametrize("bad", ["0 1", "0 1 2 3", "0 1 2;0 1 3", "0 1 x"])
def test_offset_info_refuses_bad_text(bad: str) -> None:
    with pytest.raises(ProtocolError):
        P.parse_start_offset_info(bad)


# --------------------------------------------------------------------------- topics

def test_retry_topics_and_flags() -> None:
    assert N.pop_retry_topic("G", "T") == "%RETRY%G_T"
    assert N.pop_retry_topic("G", "T", v2=True) == "%RETRY%G+T"
    assert P.retry_flag_of("T") == "0"
    assert P.retry_flag_of("%RETRY%G_T") == "1"
    assert P.retry_flag_of("%RETRY%G") == "1"  # ExtraInfoUtil treats every %RETRY% topic alike
    assert P.retry_flag_of("%RETRY%G+T") == "2"
    assert P.real_topic("T", "G", "0") == "T"
    assert P.real_topic("T", "G", "1") == "%RETRY%G_T"
    assert P.real_topic("T", "G", "2") == "%RETRY%G+T"
    assert N.original_topic("%RETRY%G_T", "G") == "T" and N.original_topic("%RETRY%G+T", "G") == "T"
    with pytest.raises(ProtocolError):
        P.real_topic("T", "G", "3")


# --------------------------------------------------------------------------- batch ack

def test_bitset_is_java_bitset_to_byte_array_in_base64() -> None:
    # BatchAckTest's offsets so+1, so+3, so+5: one byte 0b00101010.
    assert PB.encode_bitset({1, 3, 5}) == "Kg=="
    assert PB.decode_bitset("Kg==") == {1, 3, 5}
    assert PB.encode_bitset({0, 9}) == "AQI="  # bytes 0x01 0x02, little-endian
    assert PB.decode_bitset([1, 2]) == {0, 9}
    assert PB.encode_bitset(set()) == ""
    with pytest.raises(ProtocolError):
        PB.decode_bitset("not base64!")


def test_batch_ack_body_keys_and_round_trip() -> None:
    receipts = [P.ReceiptHandle.parse(t) for t in (
        "100 1000 5000 2 0 b 1 101", "100 1000 5000 2 0 b 1 103", "100 1000 5000 2 0 b 1 105",
        "0 1000 5000 2 1 b 0 0")]
    acks = PB.build_batch_acks("G", "myTopic", receipts)
    assert [(a.retry, a.queue_id, a.start_offset, sorted(a.bits)) for a in acks] == [
        ("0", 1, 100, [1, 3, 5]), ("1", 0, 0, [0])]
    body = PB.encode_batch_ack_body("b", acks)
    assert body.startswith(b'{"acks":[{"b":"Kg==","c":"G","it":5000,"pt":1000,"q":1,"r":"0","rq":2,"so":100,'
                           b'"t":"myTopic"}')
    assert body.endswith(b'],"brokerName":"b"}')
    broker, back = PB.decode_batch_ack_body(body)
    assert broker == "b" and back == acks
    assert back[0].offsets == [101, 103, 105]


def test_the_broker_reads_each_batch_ack_entry_with_its_bitset_as_one_int() -> None:
    """What the client built comes back field for field; the long names, a mix with defaults, a byte-array
    bitset and a null one read as Java writes them; anything malformed is refused as a ProtocolError."""
    receipts = [P.ReceiptHandle.parse(t) for t in (
        "100 1000 5000 2 0 b 1 101", "100 1000 5000 2 0 b 1 103", "100 1000 5000 2 0 b 1 105",
        "0 1000 5000 2 1 b 0 0", *(f"64 7 5000 3 0 b 2 {64 + i}" for i in range(32)))]
    built = PB.build_batch_acks("G", "myTopic", receipts)
    broker, acks = PB.decode_batch_ack_body(PB.encode_batch_ack_body("b", built))
    assert broker == "b" and acks == built
    assert [(a.start_offset, a.queue_id, a.revive_queue_id, a.pop_time, a.word) for a in acks] == [
        (100, 1, 2, 1000, 0b101010), (0, 0, 2, 1000, 1), (64, 2, 3, 7, (1 << 32) - 1)]
    assert acks[-1].offsets == list(range(64, 96)) and acks[0].offsets == [101, 103, 105]
    _, mixed = PB.decode_batch_ack_body(json.dumps({"acks": [
        {"consumerGroup": "G", "topic": "T", "retry": "0", "startOffset": 3, "queueId": 0, "reviveQueueId": 1,
         "popTime": 9, "invisibleTime": 8, "bitSet": "AQ=="},
        {"c": "G", "t": 5, "so": "7", "q": 1, "pt": 9, "bitSet": [5, 1]},  # no r/rq/it: defaults; a number topic
        {"c": "G", "t": "T", "r": "1", "so": 0, "q": 0, "rq": 0, "pt": 1, "it": 2, "b": None}]}).encode())
    assert mixed[0] == PB.BatchAck("G", "T", "0", 3, 0, 1, 9, 8, 1)
    assert (mixed[1].topic, mixed[1].retry, mixed[1].revive_queue_id, mixed[1].offsets) == ("5", "0", 0, [7, 9, 15])
    assert mixed[2].word == 0 and mixed[2].offsets == []
    for bad in (b'{"acks":[{"c":"G"}]}', b'{"acks":[{"c":"G","t":"T","so":"x","q":0,"pt":1}]}', b'{"acks":[3]}',
                b'{"acks":[{"b":"not base64!","c":"G","it":1,"pt":1,"q":0,"r":"0","rq":0,"so":0,"t":"T"}]}',
                b'{"acks":[{"b":{},"c":"G","it":1,"pt":1,"q":0,"r":"0","rq":0,"so":0,"t":"T"}]}', b"", b"[]",
                b'{"acks":{"a":1}}'):
        with pytest.raises(ProtocolError):
            PB.decode_batch_ack_body(bad)
    assert PB.decode_bitset_word("Kg==") == 0b101010 == PB.decode_bitset_word("Kg==")  # the second from the cache
    assert PB.decode_bitset_word("AQ==") == 1  # another bitset after a cached one: not the cached word


def test_batch_ack_accepts_alternate_names() -> None:
    body = json.dumps({"acks": [{"consumerGroup": "G", "topic": "T", "retry": "0", "startOffset": 3, "queueId": 0,
                                 "reviveQueueId": 1, "popTime": 9, "invisibleTime": 8, "bitSet": "AQ=="}]})
    broker, acks = PB.decode_batch_ack_body(body.encode())
    assert broker is None and acks[0].offsets == [3] and acks[0].consumer_group == "G"
    with pytest.raises(ProtocolError):
        PB.decode_batch_ack_body(b'{"acks":[{"c":"G"}]}')
    with pytest.raises(ProtocolError):
        PB.decode_batch_ack_body(b"")
