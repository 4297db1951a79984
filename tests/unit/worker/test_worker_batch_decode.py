"""A RUN frame's records as the handler sees them: the retry topic reset per record (issue #38 keeps it exact).

:func:`decode_batch` tests the retry prefix once per topic it sees instead of once per
record; a batch whose records change topic (a retry record after plain ones and back,
a retry record without RETRY_TOPIC, a record that does not decode in between) must
still give every record the topic Java's resetRetryAndNamespace gives it.
"""

from __future__ import annotations

from typing import Any

from rmqrun.model import Message
from rmqrun.remoting.message import encode_stored
from rmqrun.remoting.message_props import PROPERTY_RETRY_TOPIC
from rmqrun.worker.batch_decode import decode_batch


def record(topic: str, offset: int, **props: str) -> bytes:
    return bytes(encode_stored(topic=topic, body=b"b%d" % offset, properties=props, queue_offset=offset))


def test_each_record_gets_its_own_topic_when_a_batch_mixes_retry_and_plain_records() -> None:
    retry = {PROPERTY_RETRY_TOPIC: "ns%Orders"}
    corrupt = bytearray(record("ns%Orders", 4))
    corrupt[4:8] = b"\x00\x00\x00\x07"  # an unknown magic code: the record does not decode
    data = b"".join([record("ns%Orders", 0), record("%RETRY%ns%G", 1, **retry), record("%RETRY%ns%G", 2, **retry),
                     record("%RETRY%ns%G", 3), bytes(corrupt), record("%RETRY%ns%G", 5, **retry),
                     record("ns%Orders", 6)])
    msgs, offsets, errors = decode_batch(data, 0, "b", "ns")
    assert offsets == [0, 1, 2, 3, 4, 5, 6]
    topics = [m.topic if m is not None else None for m in msgs]
    assert topics == ["Orders", "Orders", "Orders", "%RETRY%G", None, "Orders", "Orders"]
    assert [e is not None for e in errors] == [False, False, False, False, True, False, False]
    assert [m.body for m in msgs if m is not None] == [b"b0", b"b1", b"b2", b"b3", b"b5", b"b6"]

    plain, _, _ = decode_batch(record("%RETRY%G", 0, **{PROPERTY_RETRY_TOPIC: "T"}) + record("T", 1), 0, "b", "")
    assert [m.topic for m in plain] == ["T", "T"]


# ---------------------------------------------------------------- the inline decode against decode_message

def _reference(data: bytes, pos: int, broker_name: str, namespace: str | None) -> tuple[list, list, list]:
    """The decode loop as it was before the inline path: decode_message per record, then Java's
    resetRetryAndNamespace. The inline path must give the same messages, offsets and errors."""
    from rmqrun.namespace import unwrap
    from rmqrun.remoting.errors import ProtocolError
    from rmqrun.remoting.message import QUEUE_OFFSET_POS, decode_message

    msgs: list = []
    offsets: list = []
    errors: list = []
    while pos < len(data):
        try:
            msg, end = decode_message(data, pos, broker_name=broker_name)
        except ProtocolError as exc:
            offsets.append(int.from_bytes(data[pos + QUEUE_OFFSET_POS:pos + QUEUE_OFFSET_POS + 8], "big",
                                          signed=True))
            msgs.append(None)
            errors.append(f"record {len(msgs) - 1} does not decode: {exc}")
            pos += int.from_bytes(data[pos:pos + 4], "big", signed=True)
            continue
        offsets.append(msg.queue_offset)
        if msg.topic.startswith("%RETRY%"):
            retry_topic = msg.properties.get(PROPERTY_RETRY_TOPIC)
            if retry_topic:
                msg.topic = retry_topic
        if namespace:
            msg.topic = unwrap(namespace, msg.topic)
        msgs.append(msg)
        errors.append(None)
        pos = end
    return msgs, offsets, errors


FIELDS = ("topic", "body", "properties", "msg_id", "offset_msg_id", "broker_name", "queue_id", "queue_offset",
          "commit_log_offset", "born_timestamp", "store_timestamp", "born_host", "store_host", "reconsume_times",
          "flag", "sys_flag", "body_crc", "prepared_transaction_offset", "tags", "keys")


def _shapes(rng: Any, i: int) -> bytes:
    """One record of a random shape: the usual one, or anything decode_message handles differently."""
    import zlib

    from rmqrun.remoting.message import SYSFLAG_COMPRESSED

    topic = rng.choice(["Orders", "Orders", "%RETRY%G", "%RETRY%ns%G", "ns%Orders", "Zakázky✓", "T" * 130, ""])
    props: dict[str, str] = rng.choice([
        {"UNIQ_KEY": f"ID{i:04X}", "TAGS": "TagA", "KEYS": "k1 k2"}, {}, {"TAGS": "标签", "ключ": "значение"},
        {PROPERTY_RETRY_TOPIC: rng.choice(["ns%Orders", "Orders", ""]), "RECONSUME_TIME": "1"}])
    body = rng.choice([b"", b"x", bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300)))])
    sys_flag = 0
    if rng.random() < 0.1:
        body, sys_flag = zlib.compress(body), SYSFLAG_COMPRESSED
    born = rng.choice(["10.0.0.9:40000", "10.0.0.9:40000", "[::1]:40000"])
    store = rng.choice(["127.0.0.1:10911", "127.0.0.1:10911", "[fe80::1]:10911"])
    rec = encode_stored(topic=topic, body=body, properties=props, queue_id=3, queue_offset=100 + i,
                        commit_log_offset=5000 * i, sys_flag=sys_flag, born_host=born, store_host=store,
                        born_timestamp=1_700_000_000_000 + i, store_timestamp=1_700_000_000_500 + i,
                        reconsume_times=rng.randint(0, 3), flag=rng.randint(0, 2), prepared_transaction_offset=i)
    if rng.random() < 0.25:  # a corrupted byte anywhere past the size field (the supervisor checked sizes)
        at = rng.randrange(4, len(rec))
        rec[at] = rng.choice([0x00, 0xFF, 0x80, 0xC3, rec[at] ^ 0x01])
    return bytes(rec)


def test_the_inline_decode_gives_what_decode_message_gives_for_every_shape_of_record() -> None:
    import copy
    import dataclasses
    import pickle
    import random

    rng = random.Random(38)
    for trial in range(400):
        data = b"".join(_shapes(rng, i) for i in range(rng.randint(1, 12)))
        lead = bytes(rng.randint(0, 40)) if trial % 3 == 0 else b""  # records at a position inside the bytes
        namespace = rng.choice([None, "", "ns"])
        got = decode_batch(lead + data, len(lead), "broker-a", namespace)
        want = _reference(lead + data, len(lead), "broker-a", namespace)
        if trial % 5 == 0:  # before any field is read: the deferred fields travel as values
            fresh = decode_batch(lead + data, len(lead), "broker-a", namespace)[0]
            assert [pickle.loads(pickle.dumps(m)) for m in fresh] == want[0]
            assert [copy.copy(m) for m in decode_batch(lead + data, len(lead), "broker-a", namespace)[0]] == want[0]
            assert [dataclasses.replace(m) for m in decode_batch(lead + data, len(lead), "broker-a",
                                                                 namespace)[0] if m] == [w for w in want[0] if w]
        assert got[1] == want[1] and got[2] == want[2], trial
        for k, (m, w) in enumerate(zip(got[0], want[0], strict=True)):
            assert (m is None) == (w is None), (trial, k)
            if m is None:
                continue
            turn = (trial + k) % len(FIELDS)  # each field (derived, deferred record numbers) is read first somewhere
            order = FIELDS[turn:] + FIELDS[:turn] if k % 2 else (FIELDS[turn:] + FIELDS[:turn])[::-1]
            for name in order:
                assert getattr(m, name) == getattr(w, name), (trial, k, name)
                assert type(getattr(m, name)) is type(getattr(w, name)), (trial, k, name)
            assert m == w and repr(m) == repr(w) and type(m) is Message


def test_a_memoryview_of_the_records_gives_bytes_bodies() -> None:
    data = record("T", 1) + record("T", 2)
    msgs, offsets, _ = decode_batch(memoryview(b"xx" + data), 2, "b", None)
    assert offsets == [1, 2] and [m.body for m in msgs] == [b"b1", b"b2"]
    assert all(type(m.body) is bytes for m in msgs)


def _patched(rec: bytes, old: bytes, new: bytes) -> bytes:
    assert len(old) == len(new) and rec.count(old) == 1
    return rec.replace(old, new)


def test_records_whose_topic_is_not_utf8_fail_each_even_after_one_like_them() -> None:
    """The topic text is shared by records with the same topic bytes: never the text of bytes that failed."""
    bad = [_patched(record("TopicX", i), b"TopicX", b"Top\xffcX") for i in (1, 2)]
    data = record("TopicX", 0) + bad[0] + bad[1] + record("TopicX", 3)
    assert decode_batch(data, 0, "b", None)[2] == _reference(data, 0, "b", None)[2]
    msgs, offsets, errors = decode_batch(data, 0, "b", None)
    assert [m is None for m in msgs] == [False, True, True, False] and offsets == [0, 1, 2, 3]
    assert "malformed" in str(errors[1]) and "malformed" in str(errors[2])


def test_a_properties_length_past_a_signed_short_does_not_decode() -> None:
    """Java reads the properties length as a short: 0x8000 and up is negative, so the record is refused
    (the broker never stores more than 32767 bytes of properties)."""
    import struct

    text = "a=" + "x" * 32765
    rec = bytearray(encode_stored(topic="T", body=b"b", properties=text, queue_offset=7))
    at = len(rec) - len(text) - 2
    assert struct.unpack_from(">h", rec, at)[0] == 32767
    struct.pack_into(">H", rec, at, 0x8000)
    rec += b"x"
    struct.pack_into(">i", rec, 0, len(rec))
    data = record("T", 6) + bytes(rec) + record("T", 8)
    msgs, offsets, errors = decode_batch(data, 0, "b", None)
    assert errors == _reference(data, 0, "b", None)[2]
    assert [m is None for m in msgs] == [False, True, False] and offsets == [6, 7, 8]
    assert "properties length -32768" in str(errors[1])


RECORD_NUMBERS = ("commit_log_offset", "flag", "body_crc", "prepared_transaction_offset")


def test_the_record_numbers_read_late_are_the_records_own_and_a_write_first_is_kept() -> None:
    """The inline decode leaves commit_log_offset, flag, body_crc and prepared_transaction_offset to the first
    read (model.py's _RECORD_NAMES): each, read first or after any derived field, is the stored value;
    one written before any read keeps what was written, and every other field stays the record's."""
    rec = bytes(encode_stored(topic="T", body=b"body", properties={"UNIQ_KEY": "U1", "TAGS": "a"}, queue_offset=9,
                              commit_log_offset=123_456_789_012, flag=7, prepared_transaction_offset=42,
                              born_host="10.1.2.3:4567", store_host="10.9.8.7:10911"))
    (want,), _, _ = _reference(rec, 0, "b", None)
    assert (want.commit_log_offset, want.flag, want.prepared_transaction_offset) == (123_456_789_012, 7, 42)
    assert want.body_crc != 0
    for first in RECORD_NUMBERS + ("properties", "msg_id", "born_host", "offset_msg_id"):
        (msg,), _, _ = decode_batch(rec, 0, "b", None)
        assert getattr(msg, first) == getattr(want, first), first
        assert all(getattr(msg, name) == getattr(want, name) for name in FIELDS), first
    for written in RECORD_NUMBERS:
        (msg,), _, _ = decode_batch(rec, 0, "b", None)
        setattr(msg, written, -5)
        for name in FIELDS:
            assert getattr(msg, name) == (-5 if name == written else getattr(want, name)), (written, name)
