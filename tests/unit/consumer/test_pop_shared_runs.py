"""Messages of one pop answer share a ``PopRun`` (``popped()`` makes a run per message, so these tests make
them as the decoder does): a job of several runs must ack each message once, under its own run's
checkpoint, with a receipt of its own where an extension gave it one, and a run whose invisible time
has passed must not be consumed."""

from __future__ import annotations

import asyncio

from rmqrun.client.pop_api import PopRun
from rmqrun.consumer.pop_queue import PopEntry, now_ms
from rmqrun.model import Status
from rmqrun.protocol.pop import ReceiptHandle
from tests.fakes.engine import BROKER, FakePopEngine, config, record
from tests.waiting import eventually_async


def _run_of(start: int, offsets: range, *, pop_time: int | None = None, invisible_ms: int = 60_000,
            queue_id: int = 0) -> list[PopEntry]:
    """A pop's messages of one queue: one checkpoint starting at ``start``, as the one-pass decoder makes them."""
    popped_at = now_ms() if pop_time is None else pop_time
    run = PopRun("T", "T", (start, popped_at, invisible_ms, 0, "0", BROKER, queue_id), popped_at)
    return [PopEntry.of_run(memoryview(bytearray(record(o, topic="T", queue_id=queue_id))), run, o, 0, b"", 0)
            for o in offsets]


def _acked_by_runs(extend: bool) -> None:
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=64))
        req = engine.request()
        first, second, other_queue = _run_of(10, range(10, 15)), _run_of(15, range(15, 20)), \
            _run_of(40, range(40, 43), queue_id=1)
        engine.service.submit(req, first + second + other_queue)
        await eventually_async(lambda: engine.executor.pending, what="the job")
        assert len(engine.executor.pending) == 1 and len(engine.executor.pending[0][0]) == 13
        extended = second[2] if extend else None
        newer = ReceiptHandle(17, now_ms(), 90_000, 0, "0", BROKER, 0, 17)
        if extended is not None:
            extended.receipt = newer
        engine.executor.finish(Status.SUCCESS)
        await eventually_async(lambda: not engine.service.in_flight and req.pq.wait_ack_count == 0,
                               what="every message acked")
        receipts = engine.pop_client.acked_receipts
        assert sorted(r.queue_offset for r in receipts) == [*range(10, 20), 40, 41, 42]
        by_offset = {r.queue_offset: r for r in receipts}
        assert extended is None or by_offset[17] == newer
        assert all(by_offset[e.queue_offset] == e.run.receipt(e.queue_offset) for e in first + second + other_queue
                   if e is not extended)
        assert {by_offset[o].ck_start_offset for o in range(10, 15)} == {10}
        assert {by_offset[o].ck_start_offset for o in (15, 16, 18, 19)} == {15}
    asyncio.run(main())


def test_a_job_of_several_runs_acks_each_message_once_under_its_own_runs_checkpoint() -> None:
    _acked_by_runs(extend=False)


def test_an_extended_message_of_a_shared_run_is_acked_with_its_own_receipt_the_others_with_the_runs() -> None:
    _acked_by_runs(extend=True)


def test_a_run_whose_invisible_time_has_passed_is_not_consumed() -> None:
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop"))
        req = engine.request()
        engine.service.submit(req, _run_of(0, range(3), pop_time=now_ms() - 1500, invisible_ms=1000))
        await eventually_async(lambda: req.pq.wait_ack_count == 0, what="the lapsed messages released")
        await asyncio.sleep(0.01)
        assert engine.executor.started == [] and engine.pop_stats.expired == 3
    asyncio.run(main())
