"""``rmqrun.PullConsumer`` / ``AsyncPullConsumer`` against the embedded broker over real TCP.

One broker for the module (each test uses its own topics and groups). Messages
are sent to chosen queues, so every expectation is exact: which offsets, which
bodies, which tags, which status.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any, Iterator, Sequence

import pytest

import rmqrun
from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.instance import ClientInstance
from rmqrun.client.producer import Producer
from rmqrun.model import MessageQueue
from rmqrun.pull import OffsetPersistError, PullStatus, TopicNotFoundError
from rmqrun.remoting.errors import RequestTimeoutError
from rmqrun.remoting.msg_id import offset_msg_id
from tests.integration.signals_kit import start_broker
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def eb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    broker = start_broker(tmp_path_factory.mktemp("pull"))
    try:
        yield broker
    finally:
        broker.stop_in_thread()


def send(eb: EmbeddedBroker, topic: str, items: Sequence[tuple[int, str | None, str]]) -> list:  # type: ignore[type-arg]
    """Send (queue id, tags, body) items in order; returns the send results."""
    async def main() -> list:  # type: ignore[type-arg]
        async with Producer(eb.namesrv_address, "PG_pull_tests") as producer:
            return [await producer.send(topic, body.encode(), tags=tags, keys=f"key-{body}",
                                        properties={"body": body}, queue=qid)
                    for qid, tags, body in items]
    return asyncio.run(main())


def broker_offset(eb: EmbeddedBroker, group: str, mq: MessageQueue) -> int | None:
    """QUERY_CONSUMER_OFFSET asked directly, not through the pull consumer."""
    async def main() -> int | None:
        inst = ClientInstance(eb.namesrv_address, instance_name="probe-offset")
        try:
            return await inst.broker.query_consumer_offset(eb.broker_address, group, mq)
        finally:
            await inst.close()
    return asyncio.run(main())


def held_on(eb: EmbeddedBroker, topic: str) -> int:
    """Pulls the broker holds on ``topic`` now."""
    return sum(len(pulls) for (t, _), pulls in list(eb.broker.hold._held.items()) if t == topic)


def mq_of(topic: str, qid: int) -> MessageQueue:
    return MessageQueue(topic, "broker-a", qid)


# ------------------------------------------------------------------ queues and statuses

def test_queues_of_a_topic_and_an_unknown_topic(eb: EmbeddedBroker) -> None:
    send(eb, "PQ_queues", [(0, None, "a")])
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_queues") as c:
        assert c.fetch_subscribe_message_queues("PQ_queues") == [mq_of("PQ_queues", i) for i in range(4)]
        with pytest.raises(TopicNotFoundError, match="'PQ_missing' does not exist") as info:
            c.fetch_subscribe_message_queues("PQ_missing")
        assert info.value.topic == "PQ_missing"
        with pytest.raises(TopicNotFoundError, match="PQ_missing"):
            c.pull(mq_of("PQ_missing", 0), "*", 0)


def test_every_pull_status(eb: EmbeddedBroker) -> None:
    topic = "PQ_status"
    sent = send(eb, topic, [(1, "TagA", "m0"), (1, "TagB", "m1"), (1, "TagA", "m2"), (1, None, "m3")])
    mq = mq_of(topic, 1)
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_status") as c:
        found = c.pull(mq, "*", 0)
        assert found.status is PullStatus.FOUND
        assert (found.next_begin_offset, found.min_offset, found.max_offset) == (4, 0, 4)
        assert [(m.queue_offset, m.tags, m.body) for m in found.messages] == [
            (0, "TagA", b"m0"), (1, "TagB", b"m1"), (2, "TagA", b"m2"), (3, None, b"m3")]
        assert [m.msg_id for m in found.messages] == [r.msg_id for r in sent]
        assert [m.offset_msg_id for m in found.messages] == [r.offset_msg_id for r in sent]
        first = found.messages[0]
        assert (first.topic, first.broker_name, first.queue_id) == (topic, "broker-a", 1)
        assert first.keys == "key-m0"
        assert first.properties["body"] == "m0" and first.store_timestamp > 0 and first.born_timestamp > 0

        tagged = c.pull(mq, "TagA || TagC", 0)
        assert tagged.status is PullStatus.FOUND
        assert [(m.queue_offset, m.body) for m in tagged.messages] == [(0, b"m0"), (2, b"m2")]

        limited = c.pull(mq, "*", 1, max_nums=2)
        assert [m.queue_offset for m in limited.messages] == [1, 2] and limited.next_begin_offset == 3

        none_new = c.pull(mq, "*", 4)
        assert none_new.status is PullStatus.NO_NEW_MSG and none_new.messages == []
        assert none_new.next_begin_offset == 4

        unmatched = c.pull(mq, "TagZ", 0)
        assert unmatched.status is PullStatus.NO_MATCHED_MSG and unmatched.messages == []
        assert unmatched.next_begin_offset == 4  # the broker scanned to the end

        illegal = c.pull(mq, "*", 100)
        assert illegal.status is PullStatus.OFFSET_ILLEGAL and illegal.messages == []
        assert illegal.next_begin_offset == 4 and illegal.max_offset == 4
        assert illegal.remark == "OFFSET_OVERFLOW_BADLY"


def test_tags_with_one_hash_are_told_apart_client_side(eb: EmbeddedBroker) -> None:
    # "Aa" and "BB" have the same Java hash code: the broker's consume-queue filter keeps both
    send(eb, "PQ_hash", [(0, "BB", "bb0"), (0, "Aa", "aa1"), (0, "BB", "bb2")])
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_hash") as c:
        r = c.pull(mq_of("PQ_hash", 0), "Aa", 0)
        assert r.status is PullStatus.FOUND and r.next_begin_offset == 3
        assert [(m.queue_offset, m.body) for m in r.messages] == [(1, b"aa1")]
        only_bb = c.pull(mq_of("PQ_hash", 0), "Aa", 2)
        assert only_bb.status is PullStatus.FOUND and only_bb.messages == []  # found by hash, dropped by tag


# ------------------------------------------------------------------ blocking pulls

def test_blocking_pull_is_woken_by_a_send(eb: EmbeddedBroker) -> None:
    topic = "PQ_block"
    send(eb, topic, [(2, "T", "first")])
    mq = mq_of(topic, 2)
    hold = 600.0  # far longer than the test may run: only the send can answer the pull within it
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_block") as c:
        out: dict[str, object] = {}

        def pull() -> None:
            out["result"] = c.pull_block_if_not_found(mq, "*", 1, timeout=hold)

        t = threading.Thread(target=pull)
        t.start()
        eventually(lambda: held_on(eb, topic) == 1, what="the broker to hold the pull")
        assert t.is_alive(), "a pull at the end of the queue must be held, not answered"
        send(eb, topic, [(2, "T", "second")])
        t.join(60)
        assert not t.is_alive(), "the held pull was not woken by the send"
        result = out["result"]
        assert result.status is PullStatus.FOUND  # type: ignore[attr-defined]
        assert [m.body for m in result.messages] == [b"second"]  # type: ignore[attr-defined]


def test_blocking_pull_times_out_with_no_new_msg(eb: EmbeddedBroker) -> None:
    send(eb, "PQ_block_idle", [(0, None, "only")])
    hold = eb.broker.hold
    expired: list[tuple[str, int]] = []
    real = hold._expire

    def expire(held: Any) -> None:  # the broker answers a held pull because its hold time ran out
        expired.append((held.topic, held.queue_id))
        real(held)

    hold._expire = expire  # type: ignore[method-assign]
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_block_idle") as c:
        r = c.pull_block_if_not_found(mq_of("PQ_block_idle", 0), "*", 1, timeout=1.0)
    assert r.status is PullStatus.NO_NEW_MSG and r.next_begin_offset == 1
    assert expired == [("PQ_block_idle", 0)], "held, and answered by its hold timer (not at once)"


def test_blocking_pull_with_data_answers_at_once(eb: EmbeddedBroker) -> None:
    send(eb, "PQ_block_data", [(0, None, "x")])
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_block_data") as c:
        # a hold past the test's own timeout: a pull that found data is answered without one
        r = c.pull_block_if_not_found(mq_of("PQ_block_data", 0), "*", 0, timeout=600.0)
        assert r.status is PullStatus.FOUND


# ------------------------------------------------------------------ queue offsets, time, ids

def test_min_max_search_by_time_earliest_and_view(eb: EmbeddedBroker) -> None:
    topic = "PQ_time"
    mq = mq_of(topic, 3)
    send(eb, topic, [(3, None, f"old{i}") for i in range(3)])
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_time") as c:
        old = c.pull(mq, "*", 0).messages
        boundary = max(m.store_timestamp for m in old) + 1
        eventually(lambda: time.time() * 1000 > boundary + 2, what="the clock to pass the boundary")
        send(eb, topic, [(3, None, f"new{i}") for i in range(2)])
        assert c.min_offset(mq) == 0
        assert c.max_offset(mq) == 5
        new = c.pull(mq, "*", 3).messages
        assert [m.body for m in new] == [b"new0", b"new1"]
        assert all(m.store_timestamp > boundary + 1 for m in new)
        assert c.search_offset(mq, new[0].store_timestamp) == 3  # stored exactly then
        # otherwise the broker answers the nearest store time (RocketMQ 4.x), here an older message
        assert c.search_offset(mq, boundary) == 2
        assert c.search_offset(mq, new[1].store_timestamp + 60_000) == 4  # past the end: the last
        assert c.search_offset(mq, 0) == 0
        assert c.earliest_msg_store_time(mq) == old[0].store_timestamp
        viewed = c.view_message(new[1].offset_msg_id)
        assert (viewed.body, viewed.queue_offset, viewed.queue_id, viewed.msg_id) == (
            b"new1", 4, 3, new[1].msg_id)
        assert viewed.properties == new[1].properties


# ------------------------------------------------------------------ group offsets

def test_update_persist_and_read_back_by_a_fresh_consumer_and_the_broker(eb: EmbeddedBroker) -> None:
    topic, group = "PQ_offsets", "CG_offsets"
    send(eb, topic, [(q, None, f"m{q}{i}") for q in range(4) for i in range(3)])
    mqs = [mq_of(topic, q) for q in range(4)]
    with rmqrun.PullConsumer(eb.namesrv_address, group) as c:
        before = c.fetch_consume_offset(mqs[0])
        # the real broker answers 0 for a new group on a queue that starts at offset 0
        assert before == 0 and broker_offset(eb, group, mqs[0]) == 0
        for mq in mqs:
            assert c.pull(mq, "*", 0).status is PullStatus.FOUND
        # pulls never commit: the group has not moved
        assert all(broker_offset(eb, group, mq) == 0 for mq in mqs)
        c.update_consume_offset(mqs[0], 2)
        c.update_consume_offset(mqs[1], 3)
        assert c.fetch_consume_offset(mqs[0], from_store=False) == 2  # the local table first
        c.pull(mqs[0], "*", 0)  # a push consumer would piggyback 2 on this pull; the pull API must not
        assert c.fetch_consume_offset(mqs[0], from_store=True) == 0  # the broker has not heard yet
        assert c.updated_offsets() == {mqs[0]: 2, mqs[1]: 3}
        c.persist_consume_offsets()
        assert c.updated_offsets() == {}
        assert broker_offset(eb, group, mqs[0]) == 2 and broker_offset(eb, group, mqs[1]) == 3
        c.update_consume_offset(mqs[2], 1)  # persisted by close()
    assert broker_offset(eb, group, mqs[2]) == 1
    with rmqrun.PullConsumer(eb.namesrv_address, group) as fresh:
        assert [fresh.fetch_consume_offset(mq) for mq in mqs] == [2, 3, 1, 0]
        assert fresh.fetch_consume_offset(mqs[1], from_store=False) == 3  # falls back to the broker
        fresh.update_consume_offset(mqs[1], 1)  # moving back is allowed, as in Java
    assert broker_offset(eb, group, mqs[1]) == 1
    # another group is untouched
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_offsets_other") as other:
        assert other.fetch_consume_offset(mqs[1]) == 0


def test_group_without_offset_is_minus_one(eb: EmbeddedBroker) -> None:
    """QUERY_NOT_FOUND (a queue whose first message is gone) reads as -1, not as an error."""
    topic = "PQ_no_offset"
    send(eb, topic, [(0, None, "a")])
    mq = mq_of(topic, 0)
    store = eb.broker.store
    original = store.min_offset
    try:  # make the queue look trimmed by retention, as after a file deletion
        store.min_offset = lambda t, q: 1 if t == topic else original(t, q)  # type: ignore[method-assign]
        with rmqrun.PullConsumer(eb.namesrv_address, "CG_no_offset") as c:
            assert c.fetch_consume_offset(mq) == -1
    finally:
        store.min_offset = original  # type: ignore[method-assign]


def test_persist_failure_is_reported_and_kept_for_the_next_try(eb: EmbeddedBroker) -> None:
    send(eb, "PQ_persist_fail", [(0, None, "a")])
    real = mq_of("PQ_persist_fail", 0)
    ghost = MessageQueue("PQ_persist_fail", "broker-nowhere", 0)
    c = rmqrun.PullConsumer(eb.namesrv_address, "CG_persist_fail").start()
    try:
        c.update_consume_offset(real, 1)
        c.update_consume_offset(ghost, 1)
        with pytest.raises(OffsetPersistError, match="broker-nowhere") as info:
            c.persist_consume_offsets()
        assert list(info.value.failures) == [ghost]
        assert c.updated_offsets() == {ghost: 1}
        assert broker_offset(eb, "CG_persist_fail", real) == 1
    finally:
        with pytest.raises(OffsetPersistError):
            c.close()  # close still tries, reports, and closes the connections
    assert c._loop is None


# ------------------------------------------------------------------ how it is called

def test_sync_consumer_from_threads_and_from_inside_an_event_loop(eb: EmbeddedBroker) -> None:
    send(eb, "PQ_threads", [(q, None, f"q{q}") for q in range(4)])
    mqs = [mq_of("PQ_threads", q) for q in range(4)]
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_threads") as c:
        bodies: dict[int, bytes] = {}
        errors: list[BaseException] = []

        def worker(mq: MessageQueue) -> None:
            try:
                bodies[mq.queue_id] = c.pull(mq, "*", 0).messages[0].body
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(mq,)) for mq in mqs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors and bodies == {q: f"q{q}".encode() for q in range(4)}

        async def inside_a_loop() -> int:
            return c.max_offset(mqs[0])  # asyncio.run would refuse here; the private loop does not
        assert asyncio.run(inside_a_loop()) == 1


def test_async_twin(eb: EmbeddedBroker) -> None:
    send(eb, "PQ_async", [(0, "A", "a0"), (0, "B", "b1")])
    mq = mq_of("PQ_async", 0)

    async def main() -> None:
        async with rmqrun.AsyncPullConsumer(eb.namesrv_address, "CG_async") as c:
            assert await c.fetch_subscribe_message_queues("PQ_async") == [mq_of("PQ_async", i) for i in range(4)]
            r, r2 = await asyncio.gather(c.pull(mq, "B", 0), c.pull(mq, "*", 0))
            assert [m.body for m in r.messages] == [b"b1"] and len(r2.messages) == 2
            blocked = asyncio.ensure_future(c.pull_block_if_not_found(mq, "*", 2, timeout=20.0))
            await asyncio.to_thread(eventually, lambda: held_on(eb, "PQ_async") == 1, what="a held pull")
            assert not blocked.done()
            await asyncio.to_thread(send, eb, "PQ_async", [(0, "A", "a2")])
            woken = await asyncio.wait_for(blocked, 10)
            assert [m.body for m in woken.messages] == [b"a2"]
            assert await c.max_offset(mq) == 3 and await c.min_offset(mq) == 0
            await c.update_consume_offset(mq, 3)
        async with rmqrun.AsyncPullConsumer(eb.namesrv_address, "CG_async") as again:
            assert await again.fetch_consume_offset(mq) == 3
    asyncio.run(main())


# ------------------------------------------------------------------ failures

def _silent_listener() -> socket.socket:
    """Accepts connections and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    return srv


def test_a_broker_that_does_not_answer_is_named(eb: EmbeddedBroker) -> None:
    srv = _silent_listener()
    addr = f"127.0.0.1:{srv.getsockname()[1]}"
    try:
        with rmqrun.PullConsumer(eb.namesrv_address, "CG_silent", timeout=0.5) as c:
            with pytest.raises(RequestTimeoutError, match=f"to {addr} got no answer"):
                c.view_message(offset_msg_id(addr, 0))
    finally:
        srv.close()


def test_a_name_server_that_does_not_answer_is_named() -> None:
    srv = _silent_listener()
    addr = f"127.0.0.1:{srv.getsockname()[1]}"
    try:
        with rmqrun.PullConsumer(addr, "CG_silent_ns", timeout=0.5) as c:
            with pytest.raises(RequestTimeoutError, match=f"to {addr} got no answer"):
                c.fetch_subscribe_message_queues("T")
    finally:
        srv.close()


def test_bad_offsets_against_a_live_broker_change_nothing(eb: EmbeddedBroker) -> None:
    send(eb, "PQ_bad", [(0, None, "a")])
    mq = mq_of("PQ_bad", 0)
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_bad") as c:
        with pytest.raises(ValueError, match="offset"):
            c.update_consume_offset(mq, -1)
        with pytest.raises(ValueError, match="max_nums"):
            c.pull(mq, "*", 0, max_nums=-3)
        assert c.updated_offsets() == {}
    assert broker_offset(eb, "CG_bad", mq) == 0
