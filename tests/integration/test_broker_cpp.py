"""The Apache C++ client (PyPI rocketmq 0.4.4), unchanged, against the embedded broker.

A client nobody here wrote is the best check that the broker speaks the real
protocol: the name server's fastjson route form for old clients, numeric ext
values, codeSet [0,0] heartbeats, subscription-in-pull, send-back, retries,
queue locks for orderly consumption.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from tests.peers.cpp import cpp_available, cpp_unavailable_reason, run_producer, start_consumer

pytestmark = [pytest.mark.cpp, pytest.mark.timeout(180)]

FAST = " ".join(["1s"] * 18)


@pytest.fixture
def broker(tmp_path: Path):  # type: ignore[no-untyped-def]
    if not cpp_available():
        pytest.skip(cpp_unavailable_reason())
    with EmbeddedBroker(tmp_path / "data", message_delay_levels=FAST) as eb:
        yield eb


def test_cpp_producer_and_push_consumer_with_tags_and_retries(broker: EmbeddedBroker, tmp_path: Path) -> None:
    sent = run_producer(broker.namesrv_address, topic="CppT", count=20, tags=["TagA", "TagB", "TagC"],
                        keys_prefix="ck", home=tmp_path / "p")
    assert [s["status"] for s in sent] == ["OK"] * 20
    wanted = {i for i in range(20) if i % 3 != 2}
    with start_consumer(broker.namesrv_address, topic="CppT", group="CG_cpp", tags="TagA || TagB",
                        fail_first=[0, 3], expect=len(wanted), timeout=60, home=tmp_path / "c") as consumer:
        lines = consumer.wait_ok(len(wanted), timeout=60)
    ok = [m for m in lines if m["verdict"] == "CONSUME_SUCCESS"]
    assert {int(m["properties"]["idx"]) for m in ok} == wanted
    assert all(m["tags"] in ("TagA", "TagB") for m in lines), "the broker's tag filter let another tag through"
    retried = [m for m in ok if int(m["properties"]["idx"]) in (0, 3)]
    assert retried and all(m["reconsume_times"] >= 1 for m in retried)
    assert all(m["topic"] == "CppT" for m in ok)


def test_cpp_orderly_consumer_locks_queues(broker: EmbeddedBroker, tmp_path: Path) -> None:
    sent = run_producer(broker.namesrv_address, topic="CppOrder", count=24, orderly=True, sharding_key_mod=3,
                        home=tmp_path / "p")
    assert all(s["status"] == "OK" for s in sent)
    with start_consumer(broker.namesrv_address, topic="CppOrder", group="CG_cpp_order", orderly=True,
                        expect=24, timeout=60, home=tmp_path / "c") as consumer:
        lines = consumer.wait_ok(24, timeout=60)
    by_shard: dict[str, list[int]] = {}
    for m in lines:
        by_shard.setdefault(m["properties"]["shard"], []).append(int(m["properties"]["idx"]))
    assert sum(len(v) for v in by_shard.values()) == 24
    for shard, idxs in by_shard.items():
        assert idxs == sorted(idxs), f"shard {shard} consumed out of order: {idxs}"
    # The orderly consumer held broker-side locks on the queues it consumed.
    assert broker.broker.locks.has_live_locks("CG_cpp_order")


def test_cpp_fields_arrive_intact_and_a_restarted_consumer_resumes(broker: EmbeddedBroker, tmp_path: Path) -> None:
    """What the C++ producer sent is what its consumer reads; a new consumer process of the same
    group starts at the offsets the first one committed (only the new messages come)."""
    sent = run_producer(broker.namesrv_address, topic="CppF", count=12, tags=["TagA", "TagB"], keys_prefix="fk",
                        props={"color": "red"}, home=tmp_path / "p1")
    by_idx = {int(s["index"]): s for s in sent}
    with start_consumer(broker.namesrv_address, topic="CppF", group="CG_cppf", expect=12, timeout=60,
                        home=tmp_path / "c1") as consumer:
        first = [m for m in consumer.wait_ok(12, timeout=60) if m["verdict"] == "CONSUME_SUCCESS"]
        assert consumer.wait(60) == 0  # clean shutdown: the C++ client commits its offsets
    assert sorted(int(m["properties"]["idx"]) for m in first) == list(range(12))
    for m in first:
        s = by_idx[int(m["properties"]["idx"])]
        assert (m["topic"], m["msg_id"], m["tags"], m["keys"]) == ("CppF", s["msg_id"], s["tags"], s["keys"])
        assert m["properties"]["color"] == "red"
        assert m["body"].startswith(f"cpp-peer #{m['properties']['idx']}")
        assert m["reconsume_times"] == 0

    run_producer(broker.namesrv_address, topic="CppF", count=6, props={"color": "blue"}, home=tmp_path / "p2")
    with start_consumer(broker.namesrv_address, topic="CppF", group="CG_cppf", expect=6, timeout=60, linger=1.5,
                        home=tmp_path / "c2") as consumer:
        consumer.wait_ok(6, timeout=60)
        assert consumer.wait(60) == 0
        second = consumer.messages()
    assert len(second) == 6 and all(m["properties"]["color"] == "blue" for m in second), \
        "the restarted consumer must start after what the first one committed"
