"""The orderly consume service by queue (``consume_orderly.py``) on a fake engine: no broker, real logic.

What it guarantees: one job of a queue at a time, offsets strictly ascending, SUSPEND puts the call back
first in line with its reconsume count raised, the limit re-publishes for the DLQ and moves on, a queue
without its lock runs nothing, manual COMMIT/ROLLBACK, and a dropped queue's last job is waited for.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rmqrun.model import Status
from rmqrun.consumer.retry import reconsume_times
from rmqrun.model import MessageQueue
from tests.fakes.engine import FakeEngine, config, each_executor_kind, queued
from tests.waiting import eventually_async

MQ = MessageQueue("T", "broker-a", 0)


@pytest.fixture(autouse=True, params=["run", "submit"])
def executor_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test with an executor the service awaits in a task, and with one whose future it takes."""
    return each_executor_kind(request, monkeypatch)


def run(coro: Any) -> None:
    asyncio.run(coro)


def orderly(**kw: Any) -> FakeEngine:
    kw.setdefault("orderly", True)
    kw.setdefault("suspend_current_queue_time_ms", 10)
    engine = FakeEngine(config(**kw))
    engine.consume_service._calls_per_job = lambda: 2  # jobs of 2 calls, whatever the measured handler time
    return engine


async def _job(engine: FakeEngine) -> list[int]:
    """The offsets of the one job in flight, once it is there."""
    await eventually_async(lambda: len(engine.executor.pending) == 1, what="a job in flight")
    return engine.executor.pending[0][0].offsets


def test_one_job_of_a_queue_at_a_time_in_offset_order() -> None:
    async def main() -> None:
        engine = orderly()
        req = engine.request(MQ)
        engine.deliver(req, queued(range(3)))
        engine.deliver(req, queued(range(3, 5)))
        seen = []
        while len(seen) < 5:
            offsets = await _job(engine)
            for _ in range(20):
                await asyncio.sleep(0)
            assert len(engine.executor.pending) == 1, "a second job of the queue started"
            seen += offsets
            engine.executor.finish()
            await eventually_async(lambda: engine.offset_store.read_memory(MQ) == seen[-1] + 1,
                                   what=f"commit through {seen[-1]}")
        assert seen == [0, 1, 2, 3, 4]
        assert engine.executor.most_at_once[MQ] == 1
        await eventually_async(lambda: MQ not in engine.consume_service._queues, what="the loop to end (empty)")
        assert engine.rebalancer.idle == [], "idle is reported for a dropped queue only"
        await engine.consume_service.stop(1)

    run(main())


def test_suspend_puts_the_call_back_first_in_line_counted_once_more() -> None:
    async def main() -> None:
        engine = orderly()
        req = engine.request(MQ)
        engine.deliver(req, queued(range(2)))
        assert await _job(engine) == [0, 1]
        engine.executor.finish([Status.SUCCESS, Status.SUSPEND])
        assert await _job(engine) == [1], "offset 1 again, before anything after it"
        assert reconsume_times(engine.executor.pending[0][0].records[0]) == 1
        assert engine.offset_store.read_memory(MQ) == 1, "committed through the success only"
        assert engine.stats.failed == 1 and engine.send_back.republished == []
        engine.executor.finish()
        await eventually_async(lambda: engine.offset_store.read_memory(MQ) == 2, what="commit after the retry")
        await engine.consume_service.stop(1)

    run(main())


def test_at_the_limit_the_message_is_republished_for_the_dlq_and_the_queue_moves_on() -> None:
    async def main() -> None:
        engine = orderly(max_reconsume_times=1)
        req = engine.request(MQ)
        engine.deliver(req, queued(range(2)))
        assert await _job(engine) == [0, 1]
        engine.executor.finish([Status.SUSPEND, Status.NOT_RUN])
        assert await _job(engine) == [0, 1]  # count 1 now: at the limit on its next failure
        engine.executor.finish([Status.SUSPEND, Status.NOT_RUN])
        assert await _job(engine) == [1], "offset 0 went to the DLQ; the queue goes on after it"
        assert engine.send_back.republished == [(0, 1)]
        assert engine.offset_store.read_memory(MQ) == 1
        engine.executor.finish()
        await eventually_async(lambda: engine.offset_store.read_memory(MQ) == 2, what="commit through 1")
        await engine.consume_service.stop(1)

    run(main())


def test_a_queue_whose_lock_is_not_granted_runs_nothing() -> None:
    async def main() -> None:
        engine = orderly()
        engine.rebalancer.granted = False
        req = engine.request(MQ, locked=False)
        engine.deliver(req, queued(range(2)))
        await eventually_async(lambda: engine.rebalancer.asked == [MQ], what="the lock asked for")
        assert engine.executor.started == []
        await engine.consume_service.stop(0.01)
        assert engine.executor.started == [] and req.pq.msg_count == 2

    run(main())


def test_manual_commit_commits_at_commit_and_rolls_back_at_rollback() -> None:
    async def main() -> None:
        engine = orderly(auto_commit=False)
        engine.consume_service._calls_per_job = lambda: 4
        req = engine.request(MQ)
        engine.deliver(req, queued(range(4)))
        assert await _job(engine) == [0, 1, 2, 3]
        engine.executor.finish([Status.SUCCESS, Status.COMMIT, Status.SUCCESS, Status.ROLLBACK])
        assert await _job(engine) == [2, 3], "rolled back to the last commit"
        assert engine.offset_store.read_memory(MQ) == 2
        engine.executor.finish([Status.SUCCESS, Status.SUCCESS])
        await eventually_async(lambda: MQ not in engine.consume_service._queues, what="the loop to end (empty)")
        assert engine.offset_store.read_memory(MQ) == 2, "SUCCESS without COMMIT commits nothing"
        await engine.consume_service.stop(1)

    run(main())


def test_a_dropped_queue_is_busy_until_its_job_ends_then_reported_idle() -> None:
    async def main() -> None:
        engine = orderly()
        req = engine.request(MQ)
        engine.deliver(req, queued(range(3)))
        await _job(engine)
        assert engine.consume_service.is_busy(MQ)
        req.pq.dropped = True
        engine.executor.finish()
        await eventually_async(lambda: engine.rebalancer.idle == [req], what="the idle report")
        assert not engine.consume_service.is_busy(MQ)
        assert engine.offset_store.read_memory(MQ) == 2, "the job's commit is ours while the lock is held"
        assert len(engine.executor.started) == 1, "no new job of a dropped queue"

    run(main())


def test_a_lock_that_expires_while_a_job_runs_hands_nothing_more_over_and_asks_for_it() -> None:
    """The job's result settles in its done callback; the next job is handed over only under a fresh lock."""
    async def main() -> None:
        engine = orderly()
        engine.rebalancer.granted = False
        req = engine.request(MQ)
        engine.deliver(req, queued(range(4)))
        assert await _job(engine) == [0, 1]
        req.pq.last_lock_timestamp -= req.pq.lock_max_live_ms + 1000  # the renewals stopped meanwhile
        engine.executor.finish()
        await eventually_async(lambda: engine.rebalancer.asked == [MQ], what="the lock asked for")
        assert len(engine.executor.started) == 1, "a job was handed over once the lock had expired"
        assert engine.offset_store.read_memory(MQ) == 2, "the finished job commits"
        req.pq.note_locked()  # the rebalancer's renewal takes it again, with no other owner between
        req.pq.lock_lapsed = False
        assert await _job(engine) == [2, 3], "relocked: the queue goes on where it was"
        engine.executor.finish()
        await eventually_async(lambda: engine.offset_store.read_memory(MQ) == 4, what="commit through 3")
        await engine.consume_service.stop(1)

    run(main())


def test_stop_waits_for_the_job_in_flight_and_hands_nothing_more_over() -> None:
    async def main() -> None:
        engine = orderly()
        req = engine.request(MQ)
        engine.deliver(req, queued(range(4)))
        assert await _job(engine) == [0, 1]
        stopping = asyncio.ensure_future(engine.consume_service.stop(5))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not stopping.done(), "stop did not wait for the job in flight"
        engine.executor.finish()
        await asyncio.wait_for(stopping, 5)
        assert engine.offset_store.read_memory(MQ) == 2, "the job that finished within the grace commits"
        assert len(engine.executor.started) == 1 and req.pq.cached_count == 2, "a job was handed over at stop"
        assert not engine.consume_service.is_busy(MQ)

    run(main())


def test_stop_past_its_grace_cancels_the_job_and_puts_its_messages_back() -> None:
    async def main() -> None:
        engine = orderly()
        req = engine.request(MQ)
        engine.deliver(req, queued(range(4)))
        assert await _job(engine) == [0, 1]
        (_, future), = engine.executor.pending
        await engine.consume_service.stop(0.05)
        assert future.cancelled(), "the job in flight was not cancelled at the end of the grace"
        assert req.pq.cached_count == 4, "the cancelled job's messages stay taken"
        assert engine.offset_store.read_memory(MQ) == -1, "nothing of the cancelled job commits"
        assert not engine.consume_service.is_busy(MQ)

    run(main())


def test_manual_commit_a_first_job_of_successes_commits_nothing_until_a_commit() -> None:
    async def main() -> None:
        engine = orderly(auto_commit=False)
        req = engine.request(MQ)
        engine.deliver(req, queued(range(4)))
        assert await _job(engine) == [0, 1]
        engine.executor.finish()
        assert await _job(engine) == [2, 3]
        assert engine.offset_store.read_memory(MQ) == -1, "SUCCESS without COMMIT committed"
        engine.executor.finish([Status.SUCCESS, Status.COMMIT])
        await eventually_async(lambda: engine.offset_store.read_memory(MQ) == 4, what="the commit through 3")
        await engine.consume_service.stop(1)

    run(main())


def test_a_job_the_executor_could_not_run_is_handed_over_again_first_and_then_committed() -> None:
    """A job whose future ends in an error (the executor lost it: no verdict at all) is neither committed nor
    dropped from the queue's care: its messages are handed over again, first in line, and committed once they
    succeed (the done callback hands it to the queue's task, which puts them back)."""
    async def main() -> None:
        engine = orderly()
        req = engine.request(MQ)
        engine.deliver(req, queued(range(3)))
        first = await _job(engine)
        before = engine.offset_store.read_memory(MQ)
        _, future = engine.executor.pending.pop(0)
        future.set_exception(RuntimeError("the worker's pipe broke"))
        assert await _job(engine) == first  # again, first in line
        assert engine.offset_store.read_memory(MQ) == before, "a job that did not run committed"
        engine.executor.finish()
        await eventually_async(lambda: engine.offset_store.read_memory(MQ) == first[-1] + 1,
                               what=f"commit through {first[-1]}")
        assert (await _job(engine))[0] == first[-1] + 1
        engine.executor.finish()
        await eventually_async(lambda: engine.offset_store.read_memory(MQ) == 3, what="commit through 2")
        await engine.consume_service.stop(1)

    run(main())
