"""POP jobs merged across pops (``pop_consume._Lane``): once handler calls are known to be short, the messages
of one queue that several pops bring while ``HOLD_JOBS`` of its jobs are at the executor go as ONE job when a
job comes back, as a pull's batch does; each message still keeps its own receipt and outcome (issue #32)."""

from __future__ import annotations

import asyncio
from typing import Any

from rmqrun.consumer.pop_consume import HOLD_JOBS
from rmqrun.model import Status
from rmqrun.protocol.pop import POP_DELAY_LEVELS_S
from tests.fakes.engine import FakeExecutor, FakePopEngine, config, popped
from tests.waiting import eventually_async


async def _learned_fast(engine: FakePopEngine, req: Any) -> None:
    """One message consumed with a no-op's handler time: jobs may grow to several pops' worth from now on."""
    engine.deliver(req, [popped(100)])
    await eventually_async(lambda: engine.executor.pending, what="the first job")
    engine.executor.finish(Status.SUCCESS, handler_seconds=0.00001)
    await eventually_async(lambda: req.pq.wait_ack_count == 0 and not engine.service.in_flight,
                           what="the first job settled")


async def _held_jobs(engine: FakePopEngine, req: Any) -> None:
    """``HOLD_JOBS`` pops, each its own job at the executor (nothing to merge with yet)."""
    for i in range(HOLD_JOBS):  # one turn of the loop each (pops read in one turn make one job)
        engine.deliver(req, [popped(10 * i), popped(10 * i + 1)])
        await eventually_async(lambda: len(engine.executor.pending) == i + 1, what="a held job")


def test_two_pops_of_one_queue_become_one_job_and_each_message_keeps_its_outcome() -> None:
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop"), executor=FakeExecutor(parallelism=1))
        req = engine.request()
        await _learned_fast(engine, req)
        await _held_jobs(engine, req)
        # two more pops while the queue's jobs are out: they wait, counted as un-acked by flow control
        engine.deliver(req, [popped(52), popped(50)])
        engine.deliver(req, [popped(51), popped(53)])
        await asyncio.sleep(0)
        assert len(engine.executor.started) == 1 + HOLD_JOBS, "the later pops wait for a job to come back"
        assert req.pq.wait_ack_count == 2 * HOLD_JOBS + 4
        engine.executor.finish(Status.SUCCESS)
        await eventually_async(lambda: len(engine.executor.started) == 2 + HOLD_JOBS, what="the merged job")
        merged = engine.executor.started[-1]
        assert merged.offsets == [50, 51, 52, 53], "both pops' messages in one job, in offset order"
        # one failure in the merged job: only that message is given back, the others acked
        engine.executor.finish([Status.SUCCESS, Status.RECONSUME_LATER, Status.SUCCESS, Status.SUCCESS],
                               job=merged)
        engine.executor.finish_all(Status.SUCCESS)
        await eventually_async(lambda: req.pq.wait_ack_count == 0 and not engine.service.in_flight,
                               what="every message settled")
        client = engine.pop_client
        assert client.changed == [(51, POP_DELAY_LEVELS_S[0] * 1000)]
        acked = client.all_acked
        assert 51 not in acked and {50, 52, 53} <= set(acked)
        assert len(acked) == len(set(acked)) == 1 + 2 * HOLD_JOBS + 3

    asyncio.run(main())


def test_a_pops_lapsed_messages_are_left_out_of_the_merged_job() -> None:
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop"), executor=FakeExecutor(parallelism=1))
        req = engine.request()
        await _learned_fast(engine, req)
        await _held_jobs(engine, req)
        engine.deliver(req, [popped(60), popped(61, invisible_ms=-1)])
        engine.deliver(req, [popped(62)])
        engine.executor.finish(Status.SUCCESS)
        await eventually_async(lambda: len(engine.executor.started) == 2 + HOLD_JOBS, what="the merged job")
        assert engine.executor.started[-1].offsets == [60, 62]
        assert engine.pop_stats.expired == 1
        engine.executor.finish_all(Status.SUCCESS)
        await eventually_async(lambda: req.pq.wait_ack_count == 0 and not engine.service.in_flight,
                               what="every message settled")
        assert 61 not in engine.pop_client.all_acked and engine.pop_client.changed == []

    asyncio.run(main())


def test_slow_calls_keep_one_job_per_handler_call_and_a_stop_hands_over_what_waits() -> None:
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop"), executor=FakeExecutor(parallelism=1))
        req = engine.request()
        engine.deliver(req, [popped(0), popped(1), popped(2)])  # nothing measured: one call's worth per job
        await eventually_async(lambda: len(engine.executor.pending) == 3, what="three one-message jobs")
        assert [j.offsets for j in engine.executor.started] == [[0], [1], [2]]
        engine.service.handler_s_per_msg = 0.00001  # now short: later pops wait behind the jobs out
        engine.deliver(req, [popped(3), popped(4)])
        await asyncio.sleep(0)
        assert len(engine.executor.started) == 3
        stopping = asyncio.ensure_future(engine.service.stop(30))
        await eventually_async(lambda: len(engine.executor.started) == 4, what="the waiting messages handed over")
        assert engine.executor.started[-1].offsets == [3, 4]
        engine.executor.finish_all(Status.SUCCESS)
        await stopping
        assert engine.pop_client.all_acked == [0, 1, 2, 3, 4]

    asyncio.run(main())
