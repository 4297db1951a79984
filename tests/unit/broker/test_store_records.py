"""The record layout as the store reads it, checked against two independent encoders."""

from __future__ import annotations

import pytest

from rmqrun.broker.store.errors import RecordFormatError
from rmqrun.remoting import message
from rmqrun.broker.store.record import (
    MAGIC_V2,
    MIN_RECORD_SIZE,
    check_body_crc,
    parse_header,
    parse_properties,
    read_store_timestamp,
    store_timestamp_pos,
)
from rmqrun.broker.store.tags_code import java_string_hash, make_tags_code_fn
from tests.unit.store_records import build_record, java_hash


def test_builder_matches_the_production_codec() -> None:
    for born, store in [(("127.0.0.1", 1), ("127.0.0.1", 10911)), (("::1", 7), ("fe80::1", 10911))]:
        mine = build_record("TopicA", 3, b"payload", properties={"TAGS": "t", "KEYS": "k1 k2"},
                           born_host=born, store_host=store, born_ts=11, store_ts=22, flag=5, reconsume_times=2)
        theirs = message.encode_stored(topic="TopicA", queue_id=3, body=b"payload",
                                       properties={"TAGS": "t", "KEYS": "k1 k2"}, flag=5,
                                       born_host=f"[{born[0]}]:{born[1]}" if ":" in born[0] else f"{born[0]}:{born[1]}",
                                       store_host=f"[{store[0]}]:{store[1]}" if ":" in store[0] else f"{store[0]}:{store[1]}",
                                       born_timestamp=11, store_timestamp=22, reconsume_times=2)
        assert bytes(mine) == bytes(theirs)


@pytest.mark.parametrize("born,store", [(("10.1.2.3", 9), ("10.0.0.2", 10911)), (("::1", 9), ("10.0.0.2", 10911)),
                                        (("10.1.2.3", 9), ("2001:db8::2", 10911)), (("::1", 9), ("::2", 1))])
def test_parse_header_finds_fields_for_every_host_width(born, store) -> None:
    rec = build_record("T1", 7, b"abc" * 10, tags="tagA", born_host=born, store_host=store, store_ts=123456789)
    h = parse_header(rec)
    assert (h.total_size, h.queue_id, h.topic, h.body_len, h.store_timestamp) == (len(rec), 7, "T1", 30, 123456789)
    assert rec[h.body_pos : h.body_pos + h.body_len] == b"abc" * 10
    assert parse_properties(rec[h.properties_pos : h.properties_pos + h.properties_len]) == {"TAGS": "tagA"}
    assert read_store_timestamp(rec) == 123456789
    assert store_timestamp_pos(h.sysflag) == (68 if ":" in born[0] else 56)
    assert check_body_crc(rec, 0, h)


def test_v2_magic_and_long_topic() -> None:
    topic = "t" * 200
    rec = build_record(topic, 0, b"x")
    h = parse_header(rec)
    assert h.magic == MAGIC_V2 and h.topic == topic


def test_minimum_record_size_is_exact() -> None:
    rec = build_record("", 0, b"", born_host=("1.2.3.4", 1))
    assert len(rec) == MIN_RECORD_SIZE


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda r: r.__setitem__(slice(4, 8), b"\x00\x00\x00\x00"), "magic"),
        (lambda r: r.__setitem__(slice(0, 4), (len(r) + 1).to_bytes(4, "big")), "available"),
        (lambda r: r.__setitem__(slice(0, 4), (len(r) - 1).to_bytes(4, "big")), "add up"),
        (lambda r: r.__setitem__(slice(84, 88), (10_000).to_bytes(4, "big")), "body length"),
    ],
)
def test_parse_header_rejects_inconsistent_records(mutate, message) -> None:
    rec = build_record("T", 0, b"body-bytes", tags="x")
    mutate(rec)
    with pytest.raises(RecordFormatError, match=message):
        parse_header(rec)


def test_crc_mismatch_is_detected() -> None:
    rec = build_record("T", 0, b"body", bad_crc=True)
    assert not check_body_crc(rec, 0, parse_header(rec))


@pytest.mark.parametrize("text", ["", "a", "TagA", "标签", "emoji😀", "x" * 100])
def test_java_string_hash(text: str) -> None:
    assert java_string_hash(text) == java_hash(text)


def test_known_java_hash_values() -> None:
    # Values computed by the JVM: "TagA".hashCode(), "hello".hashCode()
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("hello") == 99162322


def test_tags_code_rule_for_schedule_topic() -> None:
    fn = make_tags_code_fn("1s 5s 10s")
    assert fn("SCHEDULE_TOPIC_XXXX", {"DELAY": "2", "TAGS": "a"}, 1000) == 6000
    assert fn("SCHEDULE_TOPIC_XXXX", {"DELAY": "9"}, 1000) == 11000  # clamped to the last level
    assert fn("Normal", {"DELAY": "2", "TAGS": "a"}, 1000) == java_string_hash("a")
    assert fn("Normal", {}, 1000) == 0
