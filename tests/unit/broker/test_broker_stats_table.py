"""The broker's named statistics (VIEW_BROKER_STATS_DATA) over a minute, an hour and a day, on a fake clock,
and the properties text the UPDATE_*_CONFIG requests carry."""

from __future__ import annotations

from rmqrun.broker.stats import StatsTable, _Buckets
from rmqrun.protocol.admin import BrokerStatsData, parse_properties, properties_text


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_windows_forget_in_turn_and_rates_are_per_second_of_the_window() -> None:
    clock = Clock()
    table = StatsTable(clock)
    assert table.get("TOPIC_PUT_NUMS", "T") is None, "an item nobody wrote does not exist"
    for _ in range(30):  # 30 puts of 4 messages over 60 s
        table.add("TOPIC_PUT_NUMS", "T", 4)
        clock.now += 2
    data = table.get("TOPIC_PUT_NUMS", "T")
    assert data is not None
    assert data.stats_day.sum == data.stats_hour.sum == 120
    assert 100 <= data.stats_minute.sum <= 120 and data.stats_minute.avgpt == 4.0
    assert 1.5 <= data.stats_minute.tps <= 2.0  # 120 messages a minute
    assert abs(data.stats_hour.tps - 120 / 60) < 0.01, "an hour-old window's rate is over the item's age"

    clock.now += 120  # two quiet minutes
    quiet = table.get("TOPIC_PUT_NUMS", "T")
    assert quiet is not None
    assert (quiet.stats_minute.sum, quiet.stats_minute.tps, quiet.stats_minute.avgpt) == (0, 0.0, 0.0)
    assert quiet.stats_hour.sum == quiet.stats_day.sum == 120

    clock.now += 3600
    late = table.get("TOPIC_PUT_NUMS", "T")
    assert late is not None and late.stats_hour.sum == 0 and late.stats_day.sum == 120
    assert abs(late.stats_day.tps - 120 / (3600 + 180)) < 0.001

    clock.now += 24 * 3600
    gone = table.get("TOPIC_PUT_NUMS", "T")
    assert gone is not None and gone.stats_day.sum == 0


def test_a_busy_item_keeps_a_bounded_number_of_buckets() -> None:
    clock = Clock()
    table = StatsTable(clock)
    for _ in range(20_000):
        table.add("GROUP_GET_NUMS", "T@G", 1)
        clock.now += 0.5
    item = table._items[("GROUP_GET_NUMS", "T@G")]
    assert len(item.minute.buckets) <= 7 and len(item.hour.buckets) <= 61 and len(item.day.buckets) <= 25


def test_adds_within_ten_seconds_share_buckets_and_the_next_ten_seconds_open_new_ones() -> None:
    """An add in the same 10 s as the one before goes straight to the open buckets; one past them (or a clock
    that stepped back) goes through the windows, which open a bucket: the buckets come out as the windows' own
    adds make them, add by add."""
    clock = Clock()  # 1_000_000.0: a multiple of 10 and of 60, not of 3600
    table = StatsTable(clock)
    windows = (_Buckets(10.0, 6), _Buckets(60.0, 60), _Buckets(3600.0, 24))
    for step in (0.0, 3.0, 6.5, 0.5, 9.0, 30.0, -45.0, 20.0, 1.0, 3600.0, 2.0, 86400.0):
        clock.now += step
        table.add("GROUP_GET_NUMS", "T@G", 2)
        for w in windows:
            w.add(2, 1, clock.now)
        item = table._items[("GROUP_GET_NUMS", "T@G")]
        assert [list(w.buckets) for w in (item.minute, item.hour, item.day)] == [list(w.buckets) for w in windows]
        if step == 6.5:
            assert [b[1:] for b in item.minute.buckets] == [[6, 3]], "three adds in one 10 s: one bucket"
    # a read 70 s on trims the minute's open bucket; an add back in that bucket's 10 s (a clock that stepped
    # back) must not go to the bucket the window dropped
    clock.now += 70
    table.get("GROUP_GET_NUMS", "T@G")
    windows[0].window(clock.now, 1.0)
    clock.now -= 69
    table.add("GROUP_GET_NUMS", "T@G", 2)
    for w in windows:
        w.add(2, 1, clock.now)
    assert [list(w.buckets) for w in (item.minute, item.hour, item.day)] == [list(w.buckets) for w in windows]


def test_stats_data_round_trips_with_java_field_names() -> None:
    clock = Clock()
    table = StatsTable(clock)
    table.add("TOPIC_PUT_SIZE", "T", 100)
    data = table.get("TOPIC_PUT_SIZE", "T")
    assert data is not None
    raw = data.encode()
    assert raw.startswith(b'{"statsDay":{"avgpt":100.0,"sum":100,"tps":')
    assert BrokerStatsData.from_json(raw) == data


def test_properties_text_both_ways_as_java_properties_reads_it() -> None:
    assert parse_properties(properties_text({"a": "1", "b": "x=y"})) == {"a": "1", "b": "x=y"}
    text = "# comment\n! other\n\n  key = value  \nflag:true\nempty=\nbare\nspaced 1s 5s\n"
    assert parse_properties(text) == {"key": "value", "flag": "true", "empty": "", "bare": "", "spaced": "1s 5s"}


def test_checkpoints_counted_together_read_as_one_call_each() -> None:
    """A pop counts its checkpoints once (``on_pop(.., {topic: n})``): the statistics read as n calls of one
    checkpoint each, as Java's one add per checkpoint reads (the per-call average stays 1)."""
    from rmqrun.broker.stats import BROKER_CK_NUMS, GROUP_CK_NUMS, POP_REVIVE_NUMS, BrokerStats

    stats = BrokerStats("C")
    stats.on_pop("G", "T", 5, 50, {"T": 3})
    stats.on_pop("G", "T", 1, 10, {"T": 1})
    for name, key in ((GROUP_CK_NUMS, "T@G"), (BROKER_CK_NUMS, "C")):
        data = stats.table.get(name, key)
        assert data is not None and data.stats_minute.sum == 4 and data.stats_minute.avgpt == 1.0, name
    revived = stats.table.get(POP_REVIVE_NUMS, "T@G")
    assert revived is not None and revived.stats_minute.sum == 0, "known (0) from the group's first checkpoint"


def test_a_pop_counts_its_gets_as_a_pull_of_as_many_would() -> None:
    """``on_pop`` counts a pop's messages where ``on_get`` counts a pull's (group, size and broker totals, the
    group's consume TPS), and a batch ack's entries counted together (``on_pop_acks``) read as one ``on_pop_ack``
    per entry."""
    from rmqrun.broker.stats import (
        BROKER_ACK_NUMS, BROKER_GET_NUMS, GROUP_ACK_NUMS, GROUP_GET_NUMS, GROUP_GET_SIZE, BrokerStats)

    popped, pulled = BrokerStats("C"), BrokerStats("C")
    for n, size in ((32, 3300), (7, 700)):
        popped.on_pop("G", "T", n, size, {"T": 1})
        pulled.on_get("G", "T", n, size)
    popped.on_pop("G2", "T", 4, 400, {})
    pulled.on_get("G2", "T", 4, 400)
    for name, key in ((GROUP_GET_NUMS, "T@G"), (GROUP_GET_SIZE, "T@G"), (GROUP_GET_NUMS, "T@G2"),
                      (BROKER_GET_NUMS, "C")):
        a, b = popped.table.get(name, key), pulled.table.get(name, key)
        assert a is not None and b is not None, (name, key)
        assert (a.stats_minute.sum, a.stats_minute.avgpt) == (b.stats_minute.sum, b.stats_minute.avgpt), (name, key)
    assert popped.get_total == pulled.get_total == 43
    assert popped.consume_tps("G", "T") == pulled.consume_tps("G", "T") > 0
    merged, single = BrokerStats("C"), BrokerStats("C")
    merged.on_pop_acks("G", "T", 40, 2)
    single.on_pop_ack("G", "T", 32)
    single.on_pop_ack("G", "T", 8)
    for name, key in ((GROUP_ACK_NUMS, "T@G"), (BROKER_ACK_NUMS, "C")):
        a, b = merged.table.get(name, key), single.table.get(name, key)
        assert a is not None and b is not None and a.stats_minute.sum == b.stats_minute.sum == 40, name
        assert a.stats_minute.avgpt == b.stats_minute.avgpt == 20.0, name
