"""MACHINE_ROOM_NEARBY must allocate exactly as the Java 4.9.8 class does, and refuse what names no room."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmqrun.cli.settings import build, resolve
from rmqrun.consumer.allocate import AllocateAveragely
from rmqrun.consumer.allocate_nearby import (
    AllocateMachineRoomNearby, RoomResolver, RoomUnknown, check_own_room, client_instance_name, nearby_strategy,
)
from rmqrun.consumer.allocate_settings import configured_strategy
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.errors import ConfigError
from rmqrun.model import MessageQueue

JAVA_CASES = Path(__file__).parent.parent / "data" / "allocate_nearby_java_4_9_8.jsonl"
DASH = RoomResolver.parse("prefix:-", "test")


def java_cases() -> list[dict]:
    return [json.loads(line) for line in JAVA_CASES.read_text().splitlines() if line.strip()]


def strategy(wrapped: str = "AVG", consumers: str = "instance-prefix:-") -> AllocateMachineRoomNearby:
    return nearby_strategy(machine_room="room1", wrapped=wrapped, broker_rooms="prefix:-", consumer_rooms=consumers)


@pytest.mark.parametrize("case", java_cases(), ids=lambda c: f"{c['wrapped']}-{len(c['mqs'])}q-{len(c['cids'])}c")
def test_every_consumer_gets_what_the_java_class_gives_it(case: dict) -> None:
    mqs = [MessageQueue(t, b, q) for t, b, q in case["mqs"]]
    s = strategy(case["wrapped"])
    for cid, expected in case["result"].items():
        got = [mqs.index(mq) for mq in s.allocate("G", cid, mqs, case["cids"])]
        assert got == expected, cid


def test_the_java_vectors_cover_rooms_without_consumers_and_consumers_without_brokers() -> None:
    shared = lonely = 0
    for case in java_cases():
        broker_rooms = {b.split("-")[0] for _, b, _ in case["mqs"]}
        consumer_rooms = {c.split("@")[1].split("-")[0] for c in case["cids"]}
        shared += bool(broker_rooms - consumer_rooms)
        lonely += bool(consumer_rooms - broker_rooms)
    assert shared >= 10 and lonely >= 10


def rooms(n_rooms: int, queues: int, consumers: int) -> tuple[list[MessageQueue], list[str]]:
    """The Java test's layout: brokers ``IDCi-brokerName``, consumers ``IDCi-CID-j``."""
    mqs = [MessageQueue("topic_test", f"IDC{i}-brokerName", q) for i in range(1, n_rooms + 1) for q in range(queues)]
    cids = [f"IDC{i}-CID-{j}" for i in range(1, n_rooms + 1) for j in range(consumers)]
    return sorted(mqs), sorted(cids)


def allocate_all(s: AllocateMachineRoomNearby, mqs: list[MessageQueue], cids: list[str]) -> dict[str, list]:
    return {cid: s.allocate("Test-C-G", cid, mqs, cids) for cid in cids}


JAVA_TEST = nearby_strategy(machine_room="IDC1", wrapped="AVG", broker_rooms="prefix:-", consumer_rooms="prefix:-")


@pytest.mark.parametrize("consumers", [10, 20, 30])
def test_java_case_rooms_equal_each_room_keeps_its_queues(consumers: int) -> None:
    mqs, cids = rooms(5, 20, consumers)
    got = allocate_all(JAVA_TEST, mqs, cids)
    for cid, owned in got.items():
        assert all(mq.broker_name.split("-")[0] == cid.split("-")[0] for mq in owned)
    everything = [mq for owned in got.values() for mq in owned]
    assert sorted(everything) == mqs  # every queue once


@pytest.mark.parametrize("consumers", [10, 5, 20])
def test_java_case_more_consumer_rooms_than_broker_rooms(consumers: int) -> None:
    mqs, _ = rooms(5, 10, 1)
    _, cids = rooms(6, 1, consumers)
    got = allocate_all(JAVA_TEST, mqs, cids)
    assert got[cids[-1]] == [] and cids[-1].startswith("IDC6")  # a room without brokers owns nothing
    assert sorted(mq for owned in got.values() for mq in owned) == mqs


@pytest.mark.parametrize("consumers", [10, 5, 20])
def test_java_case_fewer_consumer_rooms_shares_the_empty_rooms(consumers: int) -> None:
    mqs, _ = rooms(5, 10, 1)
    _, cids = rooms(3, 1, consumers)
    got = allocate_all(JAVA_TEST, mqs, cids)
    for room in ("IDC1", "IDC2", "IDC3"):
        mine = [mq for cid, owned in got.items() if cid.startswith(room + "-") for mq in owned]
        assert {mq for mq in mqs if mq.broker_name.startswith(room + "-")} <= set(mine)
    owners = {mq.broker_name.split("-")[0] for cid, owned in got.items() for mq in owned
              if mq.broker_name.startswith(("IDC4", "IDC5"))}
    assert owners == {"IDC4", "IDC5"}  # the consumerless rooms' queues are owned, by everybody
    assert sorted(mq for owned in got.values() for mq in owned) == mqs


def test_rooms_are_visited_in_name_order_after_the_own_room() -> None:
    mqs = [MessageQueue("T", f"{r}-b", 0) for r in ("z", "a", "m")]
    # one consumer in room "m": it takes its own room first, then the consumerless rooms a and z in order
    assert DASH.room("m-b") == "m"
    s = nearby_strategy(machine_room="m", wrapped="AVG", broker_rooms="prefix:-", consumer_rooms="prefix:-")
    assert [mq.broker_name for mq in s.allocate("G", "m-1", mqs, ["m-1"])] == ["m-b", "a-b", "z-b"]


def test_a_broker_or_consumer_in_no_room_is_an_error_not_a_guess() -> None:
    s = nearby_strategy(machine_room="r1", wrapped="AVG", broker_rooms="table:b1=r1",
                        consumer_rooms="regex:@(r\\d)-")
    mq1, mq2 = MessageQueue("T", "b1", 0), MessageQueue("T", "b2", 0)
    cid = "10.0.0.1@r1-7#1"
    assert s.allocate("G", cid, [mq1], [cid]) == [mq1]
    with pytest.raises(RoomUnknown, match="broker 'b2'"):
        s.allocate("G", cid, [mq1, mq2], [cid])
    with pytest.raises(RoomUnknown, match="consumer '10.0.0.2@x'"):
        s.allocate("G", cid, [mq1], [cid, "10.0.0.2@x"])


@pytest.mark.parametrize("spec,name,room", [
    ("prefix:-", "room1-broker-a", "room1"),
    ("prefix:_", "dc2_b", "dc2"),
    ("instance-prefix:-", "10.0.0.1@room3-4242#99", "room3"),
    ("instance-prefix:-", "10.0.0.1@room3-4242#99@unit", "room3"),
    ("regex:^(\\w+)\\.", "east.broker-a", "east"),
    ("regex:west", "broker-west-1", "west"),
    ("table:broker-a=east, broker-b=west", "broker-b", "west"),
])
def test_resolver_forms(spec: str, name: str, room: str) -> None:
    assert RoomResolver.parse(spec, "s").room(name) == room


@pytest.mark.parametrize("spec,why", [
    ("prefix", "needs a form"), ("regex:(", "does not compile"), ("table:a", "not NAME=ROOM"),
    ("idc:x", "unknown form"),
])
def test_bad_resolvers_are_refused_naming_the_setting(spec: str, why: str) -> None:
    with pytest.raises(ConfigError, match=f"broker_machine_rooms=.*{why}"):
        nearby_strategy(machine_room="r", wrapped="AVG", broker_rooms=spec, consumer_rooms="prefix:-")


def config(**kw: object) -> ConsumerConfig:
    return ConsumerConfig(group="G", namesrv="127.0.0.1:9876", subscriptions={"T": "*"},
                          allocate_strategy="MACHINE_ROOM_NEARBY", **kw)  # type: ignore[arg-type]


def test_a_config_that_names_no_room_is_refused() -> None:
    with pytest.raises(ConfigError, match="needs machine_room"):
        config().validate()
    with pytest.raises(ConfigError, match="may not contain"):
        config(machine_room="room-1").validate()
    with pytest.raises(ConfigError, match="cannot wrap itself"):
        config(machine_room="r", nearby_allocate_strategy="machine-room-nearby").validate()
    with pytest.raises(ConfigError, match="with POP the broker assigns"):
        config(machine_room="r", consume_mode="pop").validate()
    assert config(machine_room="r").validate().machine_room == "r"


def test_the_settings_table_builds_it_from_flags_and_environment() -> None:
    cli = {"handler": "workers.noop:handle", "namesrv": "127.0.0.1:9876", "group": "G", "topic": "T",
           "allocate_strategy": "MACHINE_ROOM_NEARBY"}
    settings = build(resolve(cli, environ={"RMQRUN_MACHINE_ROOM": "east",
                                           "RMQRUN_NEARBY_ALLOCATE_STRATEGY": "AVG_BY_CIRCLE"}))
    s = configured_strategy(settings.consumer)
    assert isinstance(s, AllocateMachineRoomNearby) and s.java_name == "MACHINE_ROOM_NEARBY-AVG_BY_CIRCLE"
    with pytest.raises(ConfigError, match="needs machine_room"):
        build(resolve(cli, environ={}))


def test_the_room_goes_in_front_of_the_instance_name_and_is_read_back() -> None:
    name = client_instance_name("MACHINE_ROOM_NEARBY", "east", "DEFAULT", True)
    assert name.startswith("east-") and "#" in name
    assert client_instance_name("MACHINE_ROOM_NEARBY", "east", "east-svc", True) == "east-svc"
    assert client_instance_name("AVG", "east", "DEFAULT", True) == "DEFAULT"
    s = nearby_strategy(machine_room="east", wrapped="AVG", broker_rooms="prefix:-",
                        consumer_rooms="instance-prefix:-")
    check_own_room(s, f"10.0.0.1@{name}", "east")
    with pytest.raises(ConfigError, match="reads 'west'"):
        check_own_room(s, "10.0.0.1@west-1", "east")
    assert isinstance(s.wrapped, AllocateAveragely)


def test_config_and_machine_room_get_their_options_or_are_refused() -> None:
    def cfg(strategy: str, **kw: object) -> ConsumerConfig:
        return ConsumerConfig(group="G", namesrv="n:1", subscriptions={"T": "*"}, allocate_strategy=strategy,
                              **kw)  # type: ignore[arg-type]

    with pytest.raises(ConfigError, match="CONFIG needs allocate_queues"):
        cfg("CONFIG").validate()
    with pytest.raises(ConfigError, match="MACHINE_ROOM needs allocate_idcs"):
        cfg("MACHINE_ROOM").validate()
    with pytest.raises(ConfigError, match="not TOPIC@BROKER:QUEUE_ID"):
        cfg("CONFIG", allocate_queues="T:0").validate()
    mqs = [MessageQueue("T", "broker-a", 0), MessageQueue("T", "idc1@broker-b", 1)]
    by_config = configured_strategy(cfg("CONFIG", allocate_queues="T@broker-a:0"))
    assert by_config.allocate("G", "c1", mqs, ["c1", "c2"]) == [mqs[0]]
    by_room = configured_strategy(cfg("MACHINE_ROOM", allocate_idcs="idc1, idc2"))
    assert by_room.allocate("G", "c1", mqs, ["c1"]) == [mqs[1]]
    cfg("CONFIG", message_model="BROADCASTING").validate()  # broadcasting runs no strategy
