"""The batch-ack linger follows the rate (``pop_acks.AckBatcher.linger``): a slow consumer's requests, sent by the
timer under half full, make it double up to ``ACK_LINGER_MAX_S`` (fewer, fuller requests); a request filled to
``ACK_BATCH_MAX`` brings it back to ``ACK_LINGER_S``; and it never exceeds ``ACK_LINGER_SHARE`` of the invisible
time. Every message is acked once whatever the linger."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rmqrun.consumer import pop_acks
from tests.fakes.engine import FakePopEngine, config, popped
from tests.waiting import eventually_async


def _one_job_acked(engine: FakePopEngine, req: Any, offsets: range) -> Any:
    async def run() -> None:
        engine.deliver(req, [popped(i) for i in offsets])
        await eventually_async(lambda: engine.executor.pending, what="the job")
        engine.executor.finish()
        await eventually_async(lambda: not engine.service.in_flight, what="its acks answered")
    return run()


def test_a_slow_consumers_linger_grows_to_its_cap_and_every_message_is_acked_once() -> None:
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=32,
                                      pop_invisible_time_ms=60_000))
        batcher = engine.service.acks
        req = engine.request()
        assert batcher.linger == pop_acks.ACK_LINGER_S and batcher.linger_max == pop_acks.ACK_LINGER_MAX_S
        seen = [batcher.linger]
        for n in range(6):  # each job's 4 acks go by the timer, far under half a request
            await _one_job_acked(engine, req, range(10 * n, 10 * n + 4))
            seen.append(batcher.linger)
        assert seen == [0.01, 0.02, 0.04, 0.08, 0.1, 0.1, 0.1]
        assert engine.pop_client.all_acked == sorted(o for n in range(6) for o in range(10 * n, 10 * n + 4))
        assert [len(b) for b in engine.pop_client.batch_acked] == [4] * 6

    asyncio.run(main())


def test_a_request_that_fills_up_brings_the_linger_back_to_its_least(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pop_acks, "ACK_BATCH_MAX", 8)

    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=32))
        batcher = engine.service.acks
        req = engine.request()
        await _one_job_acked(engine, req, range(0, 2))
        await _one_job_acked(engine, req, range(10, 12))
        assert batcher.linger == 0.04, "two timer-sent requests under half full: doubled twice"
        await _one_job_acked(engine, req, range(20, 28))  # 8: the request is full before the timer
        assert batcher.linger == pop_acks.ACK_LINGER_S
        assert [len(b) for b in engine.pop_client.batch_acked] == [2, 2, 8]

    asyncio.run(main())


def test_the_linger_stays_within_a_share_of_a_short_invisible_time() -> None:
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=32,
                                      pop_invisible_time_ms=5_000))
        batcher = engine.service.acks
        req = engine.request()
        assert batcher.linger_max == pytest.approx(5.0 * pop_acks.ACK_LINGER_SHARE)
        for n in range(4):
            await _one_job_acked(engine, req, range(10 * n, 10 * n + 2))
        assert batcher.linger == pytest.approx(0.05)
        assert len(engine.pop_client.all_acked) == 8

    asyncio.run(main())
