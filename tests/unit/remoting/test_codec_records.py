"""Stored records and batch bodies that do not add up: each decoder says so, none guesses.

The consumer scans pull bodies (``scan_records``), names failed records
(``record_ids``), decodes them in workers (``decode_message``); the broker decodes
batch sends (``decode_batch``). Both magic codes are exercised: V1 (one-byte topic
length, what 4.9.8 writes) and V2 (a short, used for a topic over 127 bytes).
"""

from __future__ import annotations

import struct

import pytest

from rmqrun.remoting import message as m

from rmqrun.remoting import message_batch

from rmqrun.remoting import message_props

from rmqrun.remoting import msg_id
from rmqrun.remoting.errors import ProtocolError

LONG_TOPIC = "T" * 200  # over 127 bytes: the record is written with MAGIC_V2


def _record(topic: str = "T", body: bytes = b"hello", props: dict[str, str] | None = None, **kw: object) -> bytearray:
    return m.encode_stored(topic=topic, body=body, properties=props if props is not None else {"KEYS": "k"},
                           **kw)  # type: ignore[arg-type]


def _set_int(rec: bytearray, pos: int, value: int) -> bytearray:
    struct.pack_into(">i", rec, pos, value)
    return rec


def _body_len_offset(rec: bytes) -> int:
    """Position of the body length field of an IPv4 record: the 48-byte head, born host (8),
    store timestamp (8), store host (8), reconsume times (4), prepared offset (8)."""
    return 48 + 8 + 8 + 8 + 4 + 8


@pytest.mark.parametrize("topic", ["T", LONG_TOPIC], ids=["v1", "v2"])
def test_both_magic_codes_decode_scan_and_name_alike(topic: str) -> None:
    rec = _record(topic, props={"TAGS": "a", "KEYS": "k"}, queue_offset=5, commit_log_offset=77,
                  store_host="[::1]:10911")
    expected_magic = m.MAGIC_V1 if topic == "T" else m.MAGIC_V2
    assert struct.unpack_from(">i", rec, 4)[0] == expected_magic
    msg, end = m.decode_message(rec)
    assert (msg.topic, msg.body, msg.queue_offset, end) == (topic, b"hello", 5, len(rec))
    (head,) = m.scan_records(bytes(rec) * 1)
    assert head.queue_offset == 5 and head.tags == "a"
    ids = m.record_ids(rec)
    assert ids.topic == topic and ids.commit_log_offset == 77 and ids.store_host == "[::1]:10911"
    assert msg_id.decode_offset_msg_id(ids.offset_msg_id) == ("[::1]:10911", 77), "a 28-byte (IPv6) message id"


def test_offset_message_ids_of_a_wrong_length_are_refused() -> None:
    with pytest.raises(ProtocolError, match="has 8 bytes; expected 16 or 28"):
        msg_id.decode_offset_msg_id("00" * 8)


@pytest.mark.parametrize("addr", ["10911", "host:", ":80", "host:port"])
def test_parse_address_refuses_what_is_not_host_port(addr: str) -> None:
    with pytest.raises(ValueError, match="not a host:port address"):
        msg_id.parse_address(addr)


def test_properties_with_items_lacking_a_value_separator_keep_the_rest() -> None:
    text = "a\x01b\x02junk\x02\x02c\x01d=e\x02"
    assert message_props.string_to_properties(text) == {"a": "b", "c": "d=e"}


def test_a_record_whose_properties_are_not_utf8_is_scanned_but_its_properties_refused() -> None:
    rec = _record(props={"KEYS": "k"})
    rec[-1] = 0xFF
    (head,) = m.scan_records(bytes(rec))
    with pytest.raises(ProtocolError, match="properties are not UTF-8"):
        head.properties  # noqa: B018 (the property decodes lazily)
    with pytest.raises(ProtocolError, match="malformed"):
        m.decode_message(rec)


def test_scan_records_refusals() -> None:
    good = bytes(_record())
    with pytest.raises(ProtocolError, match="claims 10 bytes"):
        m.scan_records(_set_int(bytearray(good), 0, 10))
    with pytest.raises(ProtocolError, match="unknown magic code"):
        m.scan_records(_set_int(bytearray(good), 4, 0x12345678))
    with pytest.raises(ProtocolError, match="negative body length"):
        m.scan_records(_set_int(bytearray(good), _body_len_offset(good), -5))
    short_props = bytearray(good)
    struct.pack_into(">h", short_props, _body_len_offset(good) + 4 + len(b"hello") + 1 + 1, 0)
    with pytest.raises(ProtocolError, match="fields do not add up"):
        m.scan_records(short_props)
    with pytest.raises(ProtocolError, match="is truncated|is malformed"):
        m.scan_records(_set_int(bytearray(good), _body_len_offset(good), 10_000))
    with pytest.raises(ProtocolError, match="record at 0 is truncated"):
        m.scan_records(good[:20])


def test_decode_message_refusals() -> None:
    good = bytes(_record())
    with pytest.raises(ProtocolError, match="unknown magic code"):
        m.decode_message(_set_int(bytearray(good), 4, 0x12345678))
    with pytest.raises(ProtocolError, match="body length -1 runs past"):
        m.decode_message(_set_int(bytearray(good), _body_len_offset(good), -1))
    # a total size larger than the fields: the record has trailing bytes nobody accounts for
    padded = bytearray(good) + b"\x00\x00"
    _set_int(padded, 0, len(padded))
    with pytest.raises(ProtocolError, match="fields end at .* but total size is"):
        m.decode_message(padded)
    # the topic length runs past the record (V1: one byte)
    topic_len_pos = _body_len_offset(good) + 4 + len(b"hello")
    bad_topic = bytearray(good)
    bad_topic[topic_len_pos] = 120
    with pytest.raises(ProtocolError, match="topic length 120 runs past"):
        m.decode_message(bad_topic)
    # the properties length runs past the record
    bad_props = bytearray(good)
    struct.pack_into(">h", bad_props, topic_len_pos + 2, 3000)
    with pytest.raises(ProtocolError, match="properties length 3000 runs past"):
        m.decode_message(bad_props)


def test_record_ids_of_a_truncated_record() -> None:
    good = bytes(_record(LONG_TOPIC))
    with pytest.raises(ProtocolError, match="record at 0 is truncated"):
        m.record_ids(good[:_body_len_offset(good) + 2])


def test_properties_over_the_short_limit_cannot_be_encoded() -> None:
    with pytest.raises(ProtocolError, match="exceed the 32767-byte limit"):
        _record(props={"big": "x" * 40_000})


def test_decode_batch_round_trip_and_refusals() -> None:
    items = [message_batch.BatchItem(b"one", {"KEYS": "1"}), message_batch.BatchItem(b"", {}, flag=3)]
    body = message_batch.encode_batch(items)
    assert message_batch.decode_batch(body) == items
    first = bytearray(body)
    with pytest.raises(ProtocolError, match="batch record at 0 claims 9999 bytes"):
        message_batch.decode_batch(_set_int(bytearray(first), 0, 9999))
    with pytest.raises(ProtocolError, match="fields do not add up"):
        message_batch.decode_batch(_set_int(bytearray(first), 16, 1))  # body length 1 instead of 3
    with pytest.raises(ProtocolError, match="batch record at 0 is truncated"):
        message_batch.decode_batch(bytes(first[:10]))
    bad_utf8 = bytearray(message_batch.encode_batch([message_batch.BatchItem(b"x", {"K": "v"})]))
    bad_utf8[-1] = 0xFF
    with pytest.raises(ProtocolError, match="properties are not UTF-8"):
        message_batch.decode_batch(bad_utf8)
