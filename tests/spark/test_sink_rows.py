"""The sink's check of a whole partition before the first send, without a JVM: which rows are refused, and
rows past the in-memory bound kept in order in a temporary file."""

from __future__ import annotations

import pytest

from rmqrun.spark.sink_rows import BadRowError, HeldRows, SinkRow, checked_rows


def test_every_row_is_checked_before_any_is_returned() -> None:
    good = [{"body": "a", "tags": "T"}, {"body": b"b", "properties": {"k": "v", "UNIQ_KEY": "dropped"}}]
    held = checked_rows("T", good)
    assert [(r.body, r.tags, r.properties) for r in held] == [(b"a", "T", None), (b"b", None, {"k": "v"})]
    for bad, why in [({"body": None}, "(a null body)"), ({"body": ""}, "(an empty body)"),
                     ({"body": b"x" * 11}, "(a body of 11 bytes, over the maximum message size of 10 bytes)"),
                     ({"body": "x", "properties": {"a\x01": "v"}}, "property name 'a\\x01' contains the control "
                                                                  "character \\x01 (U+0001)"),
                     ({"body": "x", "tags": "t\x02"}, "tags contains the control character \\x02 (U+0002), which "
                                                       "RocketMQ uses to separate properties: 't\\x02'"),
                     ({"body": "x", "keys": "k\x02DELAY\x013"}, "keys contains the control character \\x02"),
                     ({"body": "x", "sharding_key": "k\x01"}, "sharding_key contains the control character \\x01")]:
        with pytest.raises(BadRowError) as info:
            checked_rows("T", [*good, bad, {"body": "after"}], max_size=10)
        text = str(info.value)
        assert why in text and "topic T: row 3 of this task cannot be sent (" in text, text
        assert text.endswith("; nothing of this task was sent"), text


def test_rows_past_the_memory_bound_go_to_a_file_and_come_back_in_order() -> None:
    held = HeldRows(spill_bytes=100)
    rows = [SinkRow(f"{i:03d}".encode() * 10, None, f"k{i}", {"i": str(i)}, None) for i in range(50)]
    for r in rows:
        held.add(r)
    assert held._file is not None and held._rows == [], "spilled"
    assert list(held) == rows and list(held) == rows, "in order, and readable again"
    assert held.count == 50
    held.close()
