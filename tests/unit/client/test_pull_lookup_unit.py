"""The pull API's lookup decisions, without a broker: id kinds, the id's time, key matching."""

from __future__ import annotations

import datetime as dt

from rmqrun.client.msgid import UniqueIdGenerator, nearly_time_ms
from rmqrun.model import Message
from rmqrun.pull.lookup import (
    UNIQUE_QUERY_LEEWAY_MS, earliest, has_key, matching, offset_id_address, unique_query_begin_ms,
)
from rmqrun.remoting.msg_id import offset_msg_id


def ms(when: dt.datetime) -> int:
    return int(when.timestamp() * 1000)


def test_offset_ids_decode_and_client_ids_do_not() -> None:
    assert offset_id_address(offset_msg_id("10.0.0.5:10911", 4242)) == ("10.0.0.5:10911", 4242)
    assert offset_id_address(offset_msg_id("[fd00::2]:10911", 7)) == ("[fd00::2]:10911", 7)
    client = UniqueIdGenerator("10.0.0.5", pid=1234).next_id()
    assert offset_id_address(client) is None  # its "port" is pid << 16 | ...: out of range, as in Java
    assert offset_id_address(UniqueIdGenerator("fd00::2", pid=1234).next_id()) is None
    assert offset_id_address("not hex") is None and offset_id_address("ABCD") is None


def test_the_time_in_a_client_id_is_found_this_month_or_the_last() -> None:
    made = dt.datetime(2024, 3, 10, 12, 0, 0)
    uid = UniqueIdGenerator("127.0.0.1").next_id(ms(made))
    assert nearly_time_ms(uid, ms(made) + 5_000) == ms(made)
    # read on the 2nd of April, an id made on the 31st of March is last month's
    late = dt.datetime(2024, 3, 31, 23, 0, 0)
    late_id = UniqueIdGenerator("127.0.0.1").next_id(ms(late))
    assert nearly_time_ms(late_id, ms(dt.datetime(2024, 4, 2, 8, 0, 0))) == ms(late)
    # January's previous month is December of the year before
    dec = dt.datetime(2023, 12, 20, 1, 2, 3)
    assert nearly_time_ms(UniqueIdGenerator("::1").next_id(ms(dec)), ms(dt.datetime(2024, 1, 3))) == ms(dec)
    assert unique_query_begin_ms(uid, ms(made) + 5_000) == ms(made) - UNIQUE_QUERY_LEEWAY_MS
    assert unique_query_begin_ms("zz") == 0 and unique_query_begin_ms("ABCD") == 0


def msg(body: str, keys: str | None = None, msg_id: str = "", stored: int = 0) -> Message:
    props = {"KEYS": keys} if keys is not None else {}
    return Message("T", body.encode(), props, msg_id=msg_id, store_timestamp=stored)


def test_answers_are_re_checked_against_the_key_and_the_first_copy_wins() -> None:
    answered = [msg("a", "order-1 user-7"), msg("b", "order-10"), msg("c"), msg("d", "user-7", "ID1")]
    assert [m.body for m in matching(answered, "order-1", unique_key=False)] == [b"a"]
    assert [m.body for m in matching(answered, "user-7", unique_key=False)] == [b"a", b"d"]
    assert [m.body for m in matching(answered, "ID1", unique_key=True)] == [b"d"]
    assert not has_key(msg("x", "k1  k2"), "") and has_key(msg("x", "k1  k2"), "k2")
    copies = [msg("late", msg_id="U", stored=20), msg("early", msg_id="U", stored=10)]
    assert earliest(copies).body == b"early"  # type: ignore[union-attr]
    assert earliest([]) is None
