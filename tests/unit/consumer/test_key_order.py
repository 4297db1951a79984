"""Where a message's order key comes from (``order_key``), read from raw stored records."""

from __future__ import annotations

import pytest

from rmqrun.consumer.key_order import KeyLane, key_of, parse_order_key, valid_order_key
from rmqrun.model import MessageQueue
from rmqrun.remoting.message import encode_stored


def record(props: dict[str, str] | str) -> bytes:
    return bytes(encode_stored(topic="T", body=b"x", properties=props))


FULL = {"__SHARDINGKEY": "acct-1", "KEYS": "order-9 other", "TAGS": "TagA", "region": "eu"}


@pytest.mark.parametrize("spec, props, expected", [
    ("sharding_key", FULL, "acct-1"),
    ("sharding_key", {"KEYS": "order-9 other"}, "order-9"),  # falls back to the first key
    ("sharding_key", {"TAGS": "TagA"}, None),
    ("keys", FULL, "order-9"),
    ("keys", {"__SHARDINGKEY": "acct-1"}, None),
    ("tags", FULL, "TagA"),
    ("property:region", FULL, "eu"),
    ("property:region", {"region": ""}, None),  # empty is no key
    ("property:missing", FULL, None),
])
def test_key_sources(spec: str, props: dict[str, str], expected: str | None) -> None:
    assert key_of(record(props), parse_order_key(spec)) == expected


def test_undecodable_properties_have_no_key() -> None:
    raw = bytearray(record({"KEYS": "abc"}))
    raw[-3] = 0xFF  # not UTF-8 any more
    assert key_of(bytes(raw), parse_order_key("keys")) is None
    assert key_of(b"\x00" * 10, parse_order_key("keys")) is None


@pytest.mark.parametrize("spec", ["", "key", "property:", "Tags", "property"])
def test_bad_specs_say_what_is_allowed(spec: str) -> None:
    assert not valid_order_key(spec)
    with pytest.raises(ValueError):
        parse_order_key(spec)


def test_a_lane_pins_by_its_key_and_serialises_per_queue() -> None:
    q0, q1 = MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)
    assert str(KeyLane(q0, "acct-1")) == str(KeyLane(q1, "acct-1")) == "acct-1"  # same worker
    assert KeyLane(q0, "acct-1") != KeyLane(q1, "acct-1")  # but separate lanes
    assert str(KeyLane(q0, None)) == str(q0)  # messages without a key: pinned as their queue
    assert len({KeyLane(q0, "a"), KeyLane(q0, "a"), KeyLane(q0, None)}) == 2
