"""Orderly consumption by key (``consume_keyed.py``) on a fake engine: no broker, real logic.

What it guarantees: one job per key at a time in offset order, keys in parallel, the commit below the
oldest unfinished message of any lane, a failure suspends only its key (counted once more; at the
limit re-published for the DLQ and the key moves on), nothing runs without the queue's lock, and a
dropped queue is reported idle only after its last job.
"""

from __future__ import annotations

import asyncio
from typing import Any

from rmqrun.model import Status
from rmqrun.consumer.key_order import KeyLane
from rmqrun.consumer.retry import reconsume_times
from rmqrun.model import MessageQueue
from tests.fakes.engine import FakeEngine, config, queued
from tests.waiting import eventually_async

MQ = MessageQueue("T", "broker-a", 0)
#: offset -> key: a, b, a, b, a, c
KEYS = {0: "a", 1: "b", 2: "a", 3: "b", 4: "a", 5: "c"}


def run(coro: Any) -> None:
    asyncio.run(coro)


def keyed(**kw: Any) -> FakeEngine:
    kw.setdefault("orderly", True)
    kw.setdefault("order_by", "key")
    kw.setdefault("suspend_current_queue_time_ms", 10)
    engine = FakeEngine(config(**kw))
    engine.consume_service._calls_per_job = lambda: 1  # one message per job: a lane per job, no packing
    return engine


def running(engine: FakeEngine) -> dict[str | None, list[int]]:
    """Key -> offsets of its job in flight."""
    return {job.dispatch_key.key: job.offsets for job, _ in engine.executor.pending}


def finish_key(engine: FakeEngine, key: str, verdict: Status = Status.SUCCESS, **kw: Any) -> None:
    job = next(j for j, _ in engine.executor.pending if j.dispatch_key.key == key)
    engine.executor.finish(verdict, job=job, **kw)


async def _running(engine: FakeEngine, expected: dict[str | None, list[int]]) -> None:
    await eventually_async(lambda: running(engine) == expected, what=f"jobs {expected}")


def test_keys_run_in_parallel_each_in_order_and_the_commit_waits_for_the_oldest() -> None:
    async def main() -> None:
        engine = keyed()
        req = engine.request(MQ)
        engine.deliver(req, queued(range(6), keys=KEYS))
        await _running(engine, {"a": [0], "b": [1], "c": [5]})
        finish_key(engine, "b")
        finish_key(engine, "c")
        await _running(engine, {"a": [0], "b": [3]})
        finish_key(engine, "b")
        await _running(engine, {"a": [0]})
        assert engine.offset_store.read_memory(MQ) == 0, "offset 0 still runs: 1, 3 and 5 are not committed past it"
        finish_key(engine, "a")
        await _running(engine, {"a": [2]})
        assert engine.offset_store.read_memory(MQ) == 2
        finish_key(engine, "a")
        await _running(engine, {"a": [4]})
        finish_key(engine, "a")
        await eventually_async(lambda: engine.offset_store.read_memory(MQ) == 6, what="commit past the last")
        assert [j.offsets[0] for j in engine.executor.started if j.dispatch_key.key == "a"] == [0, 2, 4]
        assert set(engine.executor.most_at_once.values()) == {1}, "one job per key at a time"
        assert engine.executor.most_at_once.keys() == {KeyLane(MQ, k) for k in "abc"}
        await engine.consume_service.stop(1)

    run(main())


def test_a_failure_suspends_only_its_key_and_counts_a_retry() -> None:
    async def main() -> None:
        engine = keyed()
        svc = engine.consume_service
        req = engine.request(MQ)
        engine.deliver(req, queued(range(4), keys=KEYS))
        await _running(engine, {"a": [0], "b": [1]})
        finish_key(engine, "a", Status.SUSPEND)
        finish_key(engine, "b")
        await _running(engine, {"a": [0], "b": [3]})  # b went on; a came back after its suspension, first
        again = next(j for j, _ in engine.executor.pending if j.dispatch_key.key == "a")
        assert reconsume_times(again.records[0]) == 1
        assert svc.suspensions == 1 and engine.stats.failed == 1
        assert engine.offset_store.read_memory(MQ) == 0
        engine.executor.finish_all()
        await _running(engine, {"a": [2]})
        engine.executor.finish_all()
        await eventually_async(lambda: engine.offset_store.read_memory(MQ) == 4, what="commit past all")
        await svc.stop(1)

    run(main())


def test_at_the_limit_a_key_dead_letters_its_message_and_moves_on() -> None:
    async def main() -> None:
        engine = keyed(max_reconsume_times=0)
        req = engine.request(MQ)
        engine.deliver(req, queued([0, 2], keys=KEYS))
        await _running(engine, {"a": [0]})
        finish_key(engine, "a", Status.SUSPEND, errors={0: "boom"})
        await _running(engine, {"a": [2]})
        assert engine.send_back.republished == [(0, 0)]
        assert "key 'a'" in engine.send_back.failures[0].error and "boom" in engine.send_back.failures[0].error
        assert engine.offset_store.read_memory(MQ) == 2
        await engine.consume_service.stop(0.01)

    run(main())


def test_without_the_queue_lock_no_lane_runs_and_the_lock_is_asked_for() -> None:
    async def main() -> None:
        engine = keyed()
        engine.rebalancer.granted = False
        req = engine.request(MQ, locked=False)
        engine.deliver(req, queued(range(3), keys=KEYS))
        await eventually_async(lambda: engine.rebalancer.asked, what="the lock asked for")
        assert engine.executor.started == []
        engine.rebalancer.granted = True  # granted at the next ask (the relock task asks again)
        req.pq.note_locked()
        req.pq.lock_lapsed = False
        await _running(engine, {"a": [0], "b": [1]})
        engine.executor.finish_all()
        await engine.consume_service.stop(1)

    run(main())


def test_a_dropped_queue_is_reported_idle_after_its_last_job() -> None:
    async def main() -> None:
        engine = keyed()
        svc = engine.consume_service
        req = engine.request(MQ)
        engine.deliver(req, queued(range(4), keys=KEYS))
        await _running(engine, {"a": [0], "b": [1]})
        assert svc.is_busy(MQ) and svc.lanes(MQ) == {"lanes": 2, "running": 2, "suspended": 0}
        req.pq.dropped = True
        finish_key(engine, "a")
        await eventually_async(lambda: engine.stats.jobs, what="the first result")
        assert svc.is_busy(MQ) and engine.rebalancer.idle == [], "b still runs: not idle yet"
        finish_key(engine, "b")
        await eventually_async(lambda: engine.rebalancer.idle == [req], what="the idle report")
        assert not svc.is_busy(MQ)
        assert len(engine.executor.started) == 2, "no new job of a dropped queue"
        assert engine.offset_store.read_memory(MQ) == 2, "the drained jobs are committed under the held lock"

    run(main())
