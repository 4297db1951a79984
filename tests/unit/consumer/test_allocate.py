"""Allocation strategies must agree with the Java 4.9.8 classes, queue for queue."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqrun.consumer.allocate import (
    STRATEGIES,
    AllocateAveragely,
    AllocateAveragelyByCircle,
    AllocateByConfig,
    AllocateByMachineRoom,
    AllocateConsistentHash,
    ConsistentHashRing,
    get_strategy,
    java_md5_ring_hash,
)
from rmqrun.model import MessageQueue

JAVA_CASES = Path(__file__).parent.parent / "data" / "allocate_java_4_9_8.jsonl"


def mqs(n: int, topic: str = "T", broker: str = "broker-a") -> list[MessageQueue]:
    return [MessageQueue(topic, broker, i) for i in range(n)]


def load_java_cases() -> list[dict]:
    return [json.loads(line) for line in JAVA_CASES.read_text().splitlines() if line.strip()]


def strategy_for(case: dict):
    name = case["strategy"]
    if name == "CONSISTENT_HASH":
        return get_strategy(name, virtual_nodes=case["virtual_nodes"])
    if name == "MACHINE_ROOM":
        return get_strategy(name, idcs=case["idcs"])
    return get_strategy(name)


@pytest.mark.parametrize("case", load_java_cases(), ids=lambda c: c["strategy"])
def test_matches_java_reference_results(case: dict) -> None:
    """Golden results from the Java classes, fed shuffled input to prove we sort ourselves."""
    all_mqs = [MessageQueue(t, b, q) for t, b, q in case["mqs"]]
    cids = case["cids"]
    strategy = strategy_for(case)
    rng = random.Random(len(cids) * 7919 + len(all_mqs))
    shuffled_mqs = all_mqs[:]
    shuffled_cids = cids[:]
    rng.shuffle(shuffled_mqs)
    rng.shuffle(shuffled_cids)
    for cid, expected_indexes in case["result"].items():
        expected = [all_mqs[i] for i in expected_indexes]
        assert strategy.allocate("G", cid, all_mqs, cids) == expected
        assert strategy.allocate("G", cid, shuffled_mqs, shuffled_cids) == expected


def test_java_cases_cover_every_hashing_strategy_and_duplicates() -> None:
    cases = load_java_cases()
    assert {c["strategy"] for c in cases} == {"AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "MACHINE_ROOM"}
    assert any(len(c["cids"]) != len(set(c["cids"])) for c in cases)
    assert {c.get("virtual_nodes") for c in cases if c["strategy"] == "CONSISTENT_HASH"} >= {0, 10}


def test_averagely_hand_computed() -> None:
    queues = mqs(8)
    cids = ["c0", "c1", "c2"]
    s = AllocateAveragely()
    # 8 % 3 = 2: the first two consumers take 3, the last takes 2, contiguous.
    assert s.allocate("G", "c0", queues, cids) == queues[0:3]
    assert s.allocate("G", "c1", queues, cids) == queues[3:6]
    assert s.allocate("G", "c2", queues, cids) == queues[6:8]


def test_averagely_more_consumers_than_queues() -> None:
    queues = mqs(2)
    cids = [f"c{i}" for i in range(4)]
    s = AllocateAveragely()
    got = [s.allocate("G", c, queues, cids) for c in cids]
    assert got == [[queues[0]], [queues[1]], [], []]


def test_by_circle_hand_computed() -> None:
    queues = mqs(7)
    cids = ["a", "b", "c"]
    s = AllocateAveragelyByCircle()
    assert s.allocate("G", "a", queues, cids) == [queues[0], queues[3], queues[6]]
    assert s.allocate("G", "b", queues, cids) == [queues[1], queues[4]]
    assert s.allocate("G", "c", queues, cids) == [queues[2], queues[5]]


def test_md5_ring_hash_matches_java_values() -> None:
    # Printed by Java's ConsistentHashRouter.MD5Hash logic on JDK 17.
    assert java_md5_ring_hash("MessageQueue [topic=T, brokerName=broker-a, queueId=0]") == 1630488180
    assert java_md5_ring_hash("cid-a-0") == 95276243
    assert java_md5_ring_hash("cid-a-9") == 683649817
    assert java_md5_ring_hash("192.0.2.2@4711#123456-3") == 414925972
    assert java_md5_ring_hash("") == 3558706393


def test_consistent_hash_hand_computed_ring() -> None:
    cids = ["cid-a", "cid-b", "cid-c"]
    points = sorted((java_md5_ring_hash(f"{c}-{i}"), c) for c in cids for i in range(10))
    queues = mqs(16, topic="TopicX")

    def owner(mq: MessageQueue) -> str:
        h = java_md5_ring_hash(str(mq))
        for point, cid in points:
            if point >= h:
                return cid
        return points[0][1]  # wrap around

    s = AllocateConsistentHash()
    allocated = {c: s.allocate("G", c, queues, cids) for c in cids}
    for cid in cids:
        assert allocated[cid] == [mq for mq in queues if owner(mq) == cid]
    assert sorted(mq for got in allocated.values() for mq in got) == queues


def test_consistent_hash_is_stable_when_a_member_leaves() -> None:
    queues = mqs(64)
    before = ["c1", "c2", "c3", "c4"]
    after = ["c1", "c2", "c3"]
    s = AllocateConsistentHash()
    for cid in after:
        kept = set(s.allocate("G", cid, queues, before))
        now = set(s.allocate("G", cid, queues, after))
        assert kept <= now  # only c4's queues move


def test_consistent_hash_zero_virtual_nodes_allocates_nothing() -> None:
    assert AllocateConsistentHash(0).allocate("G", "a", mqs(4), ["a"]) == []
    assert ConsistentHashRing(["a"], 0).route("x") is None
    with pytest.raises(ValueError):
        AllocateConsistentHash(-1)


def test_ring_duplicate_node_gets_extra_replicas() -> None:
    single = ConsistentHashRing(["a", "b"], 3)
    doubled = ConsistentHashRing(["a", "a", "b"], 3)
    assert len(single._points) == 6
    assert len(doubled._points) == 9  # "a-3".."a-5" were added, not "a-0" again


def test_by_config_returns_fixed_list_without_checks() -> None:
    fixed = [MessageQueue("T", "b", 3), MessageQueue("T", "b", 1)]
    s = get_strategy("CONFIG", queues=fixed)
    assert isinstance(s, AllocateByConfig)
    assert s.allocate("G", "someone", mqs(8), ["other"]) == fixed


def test_by_machine_room_hand_computed() -> None:
    queues = mqs(3, broker="hz@broker-a") + mqs(4, broker="sh@broker-b") + mqs(2, broker="broker-c")
    s = AllocateByMachineRoom(idcs={"hz", "sh"})
    cids = ["c0", "c1", "c2"]
    eligible = sorted(queues[:7])  # the broker-c queues have no idc
    # 7 eligible, 3 consumers: blocks of 2, then the 7th goes to c0.
    assert s.allocate("G", "c0", queues, cids) == eligible[0:2] + [eligible[6]]
    assert s.allocate("G", "c1", queues, cids) == eligible[2:4]
    assert s.allocate("G", "c2", queues, cids) == eligible[4:6]
    assert AllocateByMachineRoom(idcs={"bj"}).allocate("G", "c0", queues, cids) == []


def test_machine_room_name_parsing_follows_java_split() -> None:
    queues = [
        MessageQueue("T", "@b", 0),  # idc "" (split gives ["", "b"])
        MessageQueue("T", "x@", 0),  # split gives ["x"]: not eligible
        MessageQueue("T", "x@y@z", 0),  # three parts: not eligible
    ]
    assert AllocateByMachineRoom(idcs={"", "x"}).allocate("G", "c", queues, ["c"]) == [queues[0]]


@pytest.mark.parametrize("name", ["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "MACHINE_ROOM"])
def test_validation_like_java(name: str, caplog: pytest.LogCaptureFixture) -> None:
    s = get_strategy(name, idcs={"x"}) if name == "MACHINE_ROOM" else get_strategy(name)
    with pytest.raises(ValueError, match="current_cid"):
        s.allocate("G", "", mqs(2), ["a"])
    with pytest.raises(ValueError, match="mq_all"):
        s.allocate("G", "a", [], ["a"])
    with pytest.raises(ValueError, match="cid_all"):
        s.allocate("G", "a", mqs(2), [])
    with caplog.at_level(logging.WARNING):
        assert s.allocate("G", "stranger", mqs(2), ["a", "b"]) == []
    assert "stranger" in caplog.text


def test_get_strategy_names_and_errors() -> None:
    assert set(STRATEGIES) == {"AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "CONFIG", "MACHINE_ROOM"}
    assert isinstance(get_strategy("avg"), AllocateAveragely)
    assert isinstance(get_strategy("avg-by-circle"), AllocateAveragelyByCircle)
    assert get_strategy("CONSISTENT_HASH", virtual_nodes=3).virtual_nodes == 3
    with pytest.raises(ValueError) as err:
        get_strategy("ROUND_ROBIN")
    for valid in STRATEGIES:
        assert valid in str(err.value)
    with pytest.raises(ValueError, match="bad options"):
        get_strategy("AVG", virtual_nodes=3)


group_shapes = st.tuples(st.integers(1, 40), st.integers(1, 12))


@settings(max_examples=150, deadline=None)
@given(shape=group_shapes, name=st.sampled_from(["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH"]))
def test_every_queue_has_exactly_one_owner(shape: tuple[int, int], name: str) -> None:
    n_queues, n_cids = shape
    queues = mqs(n_queues, broker="broker-a")
    cids = [f"10.0.0.{i}@{i}#x" for i in range(n_cids)]
    s = get_strategy(name)
    owned = [mq for cid in cids for mq in s.allocate("G", cid, queues, cids)]
    assert sorted(owned) == queues
    if name != "CONSISTENT_HASH":
        sizes = [len(s.allocate("G", cid, queues, cids)) for cid in cids]
        assert max(sizes) - min(sizes) <= 1


def test_ring_collision_later_client_wins_like_java_treemap_put() -> None:
    # "c106893-0" and "c147464-0" share the MD5 ring point 3379821892 (found by search).
    # The Java classes, run on this input, give all four queues to c147464.
    assert java_md5_ring_hash("c106893-0") == java_md5_ring_hash("c147464-0") == 3379821892
    s = AllocateConsistentHash(virtual_nodes=1)
    cids = ["c147464", "c106893"]  # unsorted on purpose
    assert s.allocate("G", "c106893", mqs(4), cids) == []
    assert s.allocate("G", "c147464", mqs(4), cids) == mqs(4)
