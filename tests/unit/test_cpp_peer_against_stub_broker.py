"""The Apache C++ client peer (tests/peers) against a *stub* broker: no rmqrun code under test.

``tests/peers/stub_broker.py`` answers just enough of the protocol for the C++
client to send and receive, and records what it was sent. These tests pin what
the C++ client does (its headers, send modes, send-back, orderly locking) so that
the peer harness can be trusted when it is pointed at rmqrun's embedded broker
(``tests/integration/test_broker_cpp.py`` and the conformance tests do that).
They were in ``test_cpp_peer_harness.py`` under names that read like broker tests.
"""

from __future__ import annotations

import json
from typing import Iterator

import pytest

from tests.peers import cpp
from tests.peers.cpp import EXIT_OK
from tests.peers.stub_broker import Request, StubCluster, parse_properties
from tests.waiting import eventually

pytestmark = pytest.mark.cpp

needs_library = pytest.mark.skipif(not cpp.cpp_available(), reason=cpp.cpp_unavailable_reason())


@pytest.fixture
def stub() -> Iterator[StubCluster]:
    cluster = StubCluster().start()
    yield cluster
    cluster.stop()


@needs_library
def test_cpp_producer_sends_as_the_stub_records_them(stub: StubCluster) -> None:
    results = cpp.run_producer(stub.namesrv, topic="T_e2e", count=6, tags=["TagA", "TagB", "TagC"],
                               keys_prefix="k", props={"color": "red"})
    assert [r["index"] for r in results] == list(range(6))
    assert {r["status"] for r in results} == {"OK"}
    # The client spreads sends round-robin over the 4 queues; offset is the queue offset.
    assert [r["offset"] for r in results] == [0, 0, 0, 0, 1, 1]
    sends = stub.seen(10)  # SEND_MESSAGE, not SEND_MESSAGE_V2
    assert len(sends) == 6
    for result, request in zip(results, sends):
        assert (request.language, request.version, request.flag) == ("CPP", 63, 0)
        props = parse_properties(request.ext["properties"])
        assert props["idx"] == str(result["index"]) and props["color"] == "red"
        assert props["KEYS"] == result["keys"] and props["TAGS"] == result["tags"]
        assert props["UNIQ_KEY"] == result["msg_id"]  # the C++ result's msg id is the client-made UNIQ_KEY
        assert request.body == f"cpp-peer #{result['index']}".encode()


@needs_library
def test_cpp_producer_orderly_oneway_and_batch_sends_reach_the_stub(stub: StubCluster) -> None:
    orderly = cpp.run_producer(stub.namesrv, topic="T_mode", count=6, orderly=True, sharding_key_mod=3)
    assert [(r["shard"], r["queue"], r["queue_count"]) for r in orderly] == [(i % 3, i % 3, 4) for i in range(6)]
    assert [(m.queue_id, m.properties["shard"]) for m in stub.queues[("T_mode", 1)]] == [(1, "1"), (1, "1")]

    oneway = cpp.run_producer(stub.namesrv, topic="T_mode", count=2, oneway=True)
    assert [r["status"] for r in oneway] == ["ONEWAY", "ONEWAY"]
    assert {r.flag for r in stub.seen(10)} == {0}  # the C++ "oneway" send still waits for a response

    batch = cpp.run_producer(stub.namesrv, topic="T_batch", count=3, batch=3, tags=["TagA"])
    assert [(r["batch"], r["batch_pos"], r["status"]) for r in batch] == [(0, 0, "OK"), (0, 1, "OK"), (0, 2, "OK")]
    batch_request = stub.seen(10)[-1]
    assert batch_request.ext["batch"] == "1"  # SEND_MESSAGE with a batch body, not SEND_BATCH_MESSAGE
    stored = next(msgs for (topic, _), msgs in stub.queues.items() if topic == "T_batch")
    assert [m.properties["idx"] for m in stored] == ["0", "1", "2"]


@needs_library
def test_cpp_producer_sends_again_when_an_answer_outlives_the_send_timeout(stub: StubCluster) -> None:
    """Why the harness's send timeout (cpp.SEND_TIMEOUT_MS) is far above the client's 3 s default.

    A broker that stores a message but answers after the send timeout gets it a second time on
    another queue, and the producer reports one SEND_OK: a stall of a loaded CI box once made a
    consumer test see a message twice.
    """
    stalled: list[int] = []

    def stall_the_first_send(request: Request) -> float:
        if request.code != 10 or stalled:
            return 0.0
        stalled.append(request.code)
        return 1.5  # a producer still shutting down at 3 s can abort (its first route refresh runs then)

    stub.stall = stall_the_first_send
    results = cpp.run_producer(stub.namesrv, topic="T_twice", count=1, send_timeout_ms=400)
    assert [r["status"] for r in results] == ["OK"]
    # The producer may have stored its next copy and exited while the stub still holds the first one, which is
    # stored when the stall ends. (On a loaded box a later attempt may time out too and leave a third.)
    copies = eventually(lambda: len(stub.stored("T_twice")) >= 2 and stub.stored("T_twice"),
                        what="the stalled copy stored", timeout=30)
    assert {m.properties["idx"] for m in copies} == {"0"} and len({m.queue_id for m in copies}) >= 2

    stalled.clear()
    results = cpp.run_producer(stub.namesrv, topic="T_once", count=1)  # the harness's own timeout
    assert [r["status"] for r in results] == ["OK"] and results[0]["elapsed_ms"] >= 1500
    # it waited for the stalled answer: what the stub holds is final
    assert [m.properties["idx"] for m in stub.stored("T_once")] == ["0"]


@needs_library
def test_cpp_consumer_on_the_stub_sends_back_a_failed_delivery_and_gets_the_retry(stub: StubCluster) -> None:
    cpp.run_producer(stub.namesrv, topic="T_c", count=4, tags=["TagA", "TagB"], body_size=5000)
    # 5000 bytes > the client's 4 KiB compression threshold: stored compressed (sysFlag bit 0).
    assert all(m.sys_flag & 1 and len(m.body) < 5000 for q in stub.queues.values() for m in q)
    with cpp.start_consumer(stub.namesrv, topic="T_c", group="CG_c", tags="TagA || TagB", fail_first=[1],
                            expect=4, timeout=30) as consumer:
        assert consumer.wait(timeout=60) == EXIT_OK
    messages = consumer.messages()
    by_verdict = [(m["properties"]["idx"], m["verdict"], m["reconsume_times"]) for m in messages]
    assert ("1", "RECONSUME_LATER", 0) in by_verdict and ("1", "CONSUME_SUCCESS", 1) in by_verdict
    assert sorted(m["properties"]["idx"] for m in messages if m["verdict"] == "CONSUME_SUCCESS") == ["0", "1", "2", "3"]
    retried = next(m for m in messages if m["reconsume_times"] == 1)
    assert retried["topic"] == "T_c" and retried["properties"]["RETRY_TOPIC"] == "T_c"  # topic restored
    assert retried["body_len"] == 5000 and retried["body"].startswith("cpp-peer #1 ")  # decompressed
    assert consumer.lines()[-1] == {"event": "done", "exit_code": 0, "reason": "expect", "ok_count": 4,
                                    "deliveries": 5, "callback_errors": 0, "expect": 4}

    (send_back,) = stub.seen(36)  # CONSUMER_SEND_MSG_BACK: group, commit-log offset, delayLevel only
    assert set(send_back.ext) - {"AccessKey", "OnsChannel", "Signature"} == {"group", "offset", "delayLevel"}
    heartbeats = [json.loads(r.body) for r in stub.seen(34)]  # the producer's heartbeat may come first
    consumer_data = next(h["consumerDataSet"][0] for h in heartbeats if h.get("consumerDataSet"))
    assert (consumer_data["groupName"], consumer_data["messageModel"]) == ("CG_c", 1)  # CLUSTERING
    subs = {s["topic"]: s["subString"] for s in consumer_data["subscriptionDataSet"]}
    assert subs == {"T_c": "TagA || TagB", "%RETRY%CG_c": "*"}
    assert stub.seen(35) and stub.seen(35)[-1].ext["consumerGroup"] == "CG_c"  # unregistered at shutdown
    assert sum(v for (g, t, _), v in stub.offsets.items() if (g, t) == ("CG_c", "T_c")) == 4


@needs_library
def test_cpp_orderly_consumer_on_the_stub_locks_queues_and_retries_in_place(stub: StubCluster) -> None:
    cpp.run_producer(stub.namesrv, topic="T_o", count=6, orderly=True, sharding_key_mod=2)
    with cpp.start_consumer(stub.namesrv, topic="T_o", group="CG_o", orderly=True, fail_first=[2], expect=6,
                            timeout=30) as consumer:
        assert consumer.wait(timeout=60) == EXIT_OK
    deliveries = [(m["queue_id"], m["queue_offset"], m["verdict"]) for m in consumer.messages()]
    queue0 = [d for d in deliveries if d[0] == 0]
    # idx 2 is queue 0 offset 1: suspended, then redelivered from the same queue, before offset 2.
    assert queue0 == [(0, 0, "CONSUME_SUCCESS"), (0, 1, "RECONSUME_LATER"), (0, 1, "CONSUME_SUCCESS"),
                      (0, 2, "CONSUME_SUCCESS")]
    assert not stub.seen(36)  # orderly retries stay local: no send-back
    locked = {q["queueId"] for r in stub.seen(41) for q in json.loads(r.body)["mqSet"] if q["topic"] == "T_o"}
    assert locked == {0, 1, 2, 3}
