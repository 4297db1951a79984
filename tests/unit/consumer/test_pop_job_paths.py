"""The POP consume paths that work per job, not per message: a job's lapse read from its messages' current
receipts (``PopEntry.visible_at``, kept in step when an extension brings a new receipt), a job's messages
leaving flow control at once (``PopProcessQueue.done_all``), and a job's acks queued as one and cut into
requests of ``ACK_BATCH_MAX`` messages, each message acked once with its own newest receipt."""

from __future__ import annotations

import asyncio
from typing import Any

from rmqrun.consumer import pop_acks
from rmqrun.consumer.pop_queue import PopEntry, PopJobView, PopProcessQueue, now_ms
from rmqrun.model import MessageQueue, Status
from rmqrun.protocol.pop import ReceiptHandle
from tests.fakes.engine import FakePopEngine, config, popped
from tests.waiting import eventually_async


def _renewed(entry: PopEntry, pop_time: int, invisible: int) -> ReceiptHandle:
    r = entry.receipt
    return ReceiptHandle(r.queue_offset, pop_time, invisible, r.revive_qid, r.retry_flag, r.broker_name,
                         r.queue_id, r.queue_offset)


def test_a_jobs_lapse_follows_each_messages_newest_receipt() -> None:
    """A job reads as dropped once its earliest message has lapsed; an extension's receipt moves that
    message's lapse (and only its own), so the job is live again once every lapsed one is extended."""
    now = now_ms()
    pq = PopProcessQueue(MessageQueue("T", "b", -1))
    old = [PopEntry.of(popped(i, invisible_ms=60_000)) for i in range(3)]
    for e in old:
        e.receipt = _renewed(e, now - 120_000, 60_000)  # popped two minutes ago: lapsed
    fresh = PopEntry.of(popped(3, invisible_ms=60_000))
    view = PopJobView(pq, [*old, fresh])
    assert view.dropped and all(e.is_pop_timeout(now) for e in old) and not fresh.is_pop_timeout(now)
    for e in old[:2]:
        e.receipt = _renewed(e, now, 60_000)
        assert e.visible_at == now + 60_000 and not e.is_pop_timeout(now)
    assert view.dropped, "one message of the job is still lapsed"
    old[2].receipt = _renewed(old[2], now, 30_000)
    assert not view.dropped and old[2].visible_at == now + 30_000
    assert not PopJobView(pq, []).dropped
    pq.dropped = True
    assert view.dropped


def test_a_job_done_at_once_leaves_flow_control_and_wakes_a_waiting_pop() -> None:
    async def main() -> None:
        pq = PopProcessQueue(MessageQueue("T", "b", -1))
        entries = [PopEntry.of(popped(i)) for i in range(5)]
        other = PopEntry.of(popped(9))
        pq.add([*entries, other])
        waiting = asyncio.ensure_future(pq.wait_for_room(1, 30))
        await asyncio.sleep(0)
        assert not waiting.done()
        pq.done_all(entries)
        await asyncio.wait_for(waiting, 5)
        assert pq.entries == {other} and all(e.settled for e in entries) and not other.settled

    asyncio.run(main())


def test_a_big_job_is_acked_in_requests_of_the_batch_max_each_message_once_with_its_receipt(
        monkeypatch: Any) -> None:
    """150 messages of one job and 10 of another finish together with ACK_BATCH_MAX 64: every message is
    acked exactly once, no request holds more than 64 (the big job cut across requests), and a message extended
    while its job ran is acked with the receipt its extension brought."""
    monkeypatch.setattr(pop_acks, "ACK_BATCH_MAX", 64)

    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=256))
        client = engine.pop_client
        seen: list[list[tuple[int, ReceiptHandle]]] = []

        async def recorded(addr: str, *, groups: Any, **kw: Any) -> Any:
            seen.append([(r.queue_offset, r) for _topic, receipts in groups for r in receipts])
            return client.batch_ack_status

        client.batch_ack_receipts = recorded  # type: ignore[method-assign]
        req_a, req_b = engine.request(), engine.request()
        a = engine.deliver(req_a, [popped(i) for i in range(150)])
        b = engine.deliver(req_b, [popped(1000 + i, queue_id=3) for i in range(10)])
        await eventually_async(lambda: len(engine.executor.pending) == 2, what="both jobs")
        newer = _renewed(a[7], now_ms(), 90_000)
        a[7].receipt = newer
        engine.executor.finish()
        engine.executor.finish()
        await eventually_async(lambda: not engine.service.in_flight, what="both jobs acked")
        offsets = [o for request in seen for o, _ in request]
        assert sorted(offsets) == sorted([e.offset for e in a] + [e.offset for e in b])
        assert len(offsets) == len(set(offsets)) == 160
        assert max(map(len, seen)) == 64 and len(seen) in (3, 4)  # 64+64+22 at once, the 10 with or after the 22
        receipts = {o: r for request in seen for o, r in request}
        assert receipts[7] is newer and all(receipts[e.offset] == e.receipt for e in a + b)
        assert engine.pop_stats.acks == 160 and req_a.pq.wait_ack_count == req_b.pq.wait_ack_count == 0

    asyncio.run(main())


def test_a_job_whose_message_lapsed_before_it_ran_runs_only_the_live_ones() -> None:
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=8))
        req = engine.request()
        msgs = [popped(i) for i in range(4)]
        entries = [PopEntry.of(m) for m in msgs]
        entries[2].receipt = _renewed(entries[2], now_ms() - 120_000, 60_000)
        engine.service.submit(req, entries)
        await eventually_async(lambda: engine.executor.pending, what="the job")
        engine.executor.finish([Status.SUCCESS] * 3)
        await eventually_async(lambda: not engine.service.in_flight and req.pq.wait_ack_count == 0,
                               what="settled")
        assert engine.pop_client.all_acked == [0, 1, 3] and engine.pop_stats.expired == 1

    asyncio.run(main())


def test_jobs_that_finish_together_share_one_ack_request(monkeypatch: Any) -> None:
    """Three jobs' 15 acks go as one request (the linger made long and the max 15, so what sends it is the
    count, not the clock)."""
    monkeypatch.setattr(pop_acks, "ACK_LINGER_S", 60.0)
    monkeypatch.setattr(pop_acks, "ACK_BATCH_MAX", 15)

    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=32))
        reqs = [engine.request() for _ in range(3)]
        for n, req in enumerate(reqs):
            engine.deliver(req, [popped(100 * n + i, queue_id=n) for i in range(5)])
        await eventually_async(lambda: len(engine.executor.pending) == 3, what="three jobs")
        for _ in reqs:
            engine.executor.finish()
        await eventually_async(lambda: not engine.service.in_flight, what="acked")
        assert [sorted(b) for b in engine.pop_client.batch_acked] == [
            [0, 1, 2, 3, 4, 100, 101, 102, 103, 104, 200, 201, 202, 203, 204]]

    asyncio.run(main())


def test_a_pop_of_several_queues_makes_one_job_of_them() -> None:
    """A pop of every queue brings messages of two queues mixed: they go as one job (the assignment's, queue
    -1), in offset order, each acked with its own receipt (``test_pop_mixed_queue_jobs.py``)."""
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=32))
        req = engine.request()
        engine.deliver(req, [popped(5, queue_id=1), popped(7, queue_id=2), popped(3, queue_id=1),
                             popped(8, queue_id=2)])
        await eventually_async(lambda: len(engine.executor.pending) == 1, what="one job")
        jobs = [(j.mq.queue_id, list(j.offsets)) for j, _ in engine.executor.pending]
        assert jobs == [(-1, [3, 5, 7, 8])]
        engine.executor.finish()
        await eventually_async(lambda: not engine.service.in_flight, what="acked")
        assert sorted((r.queue_id, r.queue_offset) for r in engine.pop_client.acked_receipts) == \
            [(1, 3), (1, 5), (2, 7), (2, 8)]

    asyncio.run(main())


def test_a_batch_ack_names_each_receipt_with_the_topic_its_own_message_was_sent_to() -> None:
    """The batcher hands the client one group of receipts per job under the job's topic; a job whose
    messages name two topics (a broker that handed some out under the pop retry topic) is split, so no
    receipt is acked under another message's topic."""
    a, b = PopEntry.of(popped(1, topic="T")), PopEntry.of(popped(2, topic="T"))
    x, y = PopEntry.of(popped(3, topic="T")), PopEntry.of(popped(4, topic="%RETRY%G_T"))
    one = pop_acks._Pending(None, [a, b], [a.receipt, b.receipt], None)  # type: ignore[arg-type]
    two = pop_acks._Pending(None, [x, y, a], [x.receipt, y.receipt, a.receipt], None)  # type: ignore[arg-type]
    assert pop_acks._job_groups([one, two]) == [
        ("T", [a.receipt, b.receipt]), ("T", [x.receipt, a.receipt]), ("%RETRY%G_T", [y.receipt])]
