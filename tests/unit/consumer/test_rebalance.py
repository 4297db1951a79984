"""The rebalancer (``rebalance.py``) on a fake engine and broker: no broker process, real allocation and locks.

An allocation change drops the queues no longer ours (offset persisted to the broker and forgotten,
orderly ones unlocked, but only once their job in flight is over) and takes the new ones from the
committed offset; an orderly queue is taken only with its broker lock; a deleted topic's queues go
and come back with the topic; lock renewal pauses a queue that lost its lock and kicks one regained.
"""

from __future__ import annotations

import asyncio
from typing import Any

from rmqrun.consumer.rebalance import Rebalancer
from rmqrun.model import MessageQueue
from tests.fakes.engine import FakeEngine, config, queued
from tests.waiting import eventually_async

ME = "10.0.0.1@1"
BEFORE_ME = "10.0.0.0@1"  # sorts first: takes the first half of the queues
AFTER_ME = "10.0.0.2@1"
RETRY = "%RETRY%G"


def run(coro: Any) -> None:
    asyncio.run(coro)


def engine_with(n_queues: int = 4, **kw: Any) -> tuple[FakeEngine, list[MessageQueue]]:
    engine = FakeEngine(config(**kw))
    mqs = engine.instance.queues("T", n_queues)
    engine.instance.queues(RETRY, 1)
    engine.rebalancer = Rebalancer(engine)
    return engine, mqs


def held(engine: FakeEngine, topic: str = "T") -> list[int]:
    return sorted(mq.queue_id for mq in engine.table if mq.topic == topic)


def test_an_allocation_change_drops_and_takes_queues_and_commits_the_dropped_offsets() -> None:
    async def main() -> None:
        engine, mqs = engine_with()
        engine.broker.consumers = [ME, AFTER_ME]
        engine.broker.offsets[mqs[1]] = 7  # committed by a former owner
        assert await engine.rebalancer.rebalance()
        assert held(engine) == [0, 1]
        assert engine.table[mqs[0]].next_offset == 0 and engine.table[mqs[1]].next_offset == 7
        # consumed meanwhile
        engine.offset_store.update(mqs[0], 5, True)
        engine.offset_store.update(mqs[1], 9, True)
        old = {mq: engine.table[mq] for mq in mqs[:2]}
        engine.broker.consumers = [BEFORE_ME, ME]  # a member joins before us: we get the second half
        assert await engine.rebalancer.rebalance()
        assert held(engine) == [2, 3]
        assert [mq for mq in engine.removed if mq.topic == "T"] == mqs[:2]
        assert all(req.pq.dropped for req in old.values())
        assert [c for c in engine.broker.commits if c[0].topic == "T"] == [(mqs[0], 5), (mqs[1], 9)], \
            "each dropped queue's offset persisted"
        assert mqs[0] not in engine.offset_store and mqs[1] not in engine.offset_store, "and forgotten"
        assert not await engine.rebalancer.rebalance(), "nothing changes on a pass with the same members"
        assert engine.broker.unlocks == [], "concurrent queues hold no locks"

    run(main())


def test_broadcasting_takes_every_queue_without_asking_for_members() -> None:
    async def main() -> None:
        engine, _ = engine_with(3, message_model="BROADCASTING")
        assert await engine.rebalancer.rebalance()
        assert held(engine) == [0, 1, 2] and RETRY not in {mq.topic for mq in engine.table}

    run(main())


def test_an_orderly_queue_is_taken_only_with_its_lock() -> None:
    async def main() -> None:
        engine, mqs = engine_with(orderly=True)
        engine.broker.consumers = [ME]
        engine.broker.held_by_others = {mqs[2]}
        await engine.rebalancer.rebalance()
        assert held(engine) == [0, 1, 3]
        assert all(engine.table[mq].pq.holds_lock() for mq in engine.table)
        engine.broker.held_by_others = set()  # the other client let it go
        assert await engine.rebalancer.rebalance()
        assert held(engine) == [0, 1, 2, 3]

    run(main())


def test_an_orderly_queue_with_a_job_in_flight_is_unlocked_only_after_the_job() -> None:
    async def main() -> None:
        engine, mqs = engine_with(2, orderly=True)
        engine.broker.consumers = [ME]
        await engine.rebalancer.rebalance()
        req = engine.table[mqs[0]]
        engine.deliver(req, queued([0, 1]))
        await eventually_async(lambda: engine.executor.pending, what="a job of queue 0")
        engine.broker.consumers = [BEFORE_ME, ME]  # now queue 1 is ours and queue 0 is not
        await engine.rebalancer.rebalance()
        assert mqs[0] in engine.removing and mqs[0] in engine.table, "removal waits for the job in flight"
        assert engine.stopped_pulls == [mqs[0]] and req.pq.dropped
        assert all(mqs[0] not in unlocked for unlocked, _ in engine.broker.unlocks), "not unlocked while it runs"
        engine.executor.finish()
        await eventually_async(lambda: mqs[0] not in engine.table, what="the removal to finish")
        assert ([mqs[0]], True) in engine.broker.unlocks, "unlocked (one way) once the job is over"
        assert (mqs[0], 2) in engine.broker.commits, "the job's commit persisted before the unlock"
        assert mqs[0] not in engine.removing and engine.wakes == 1

    run(main())


def test_a_deleted_topic_is_dropped_and_picked_up_again() -> None:
    async def main() -> None:
        engine, mqs = engine_with(2)
        engine.broker.consumers = [ME]
        await engine.rebalancer.rebalance()
        assert held(engine) == [0, 1]
        del engine.instance.routes["T"]
        engine.rebalancer.suspect("T")  # a broker said "topic not exist" to a pull
        assert await engine.rebalancer.rebalance()
        assert held(engine) == [] and engine.rebalancer.missing == {"T"}
        assert engine.instance.refreshed == ["T"] and engine.instance.forgotten == ["T"]
        engine.instance.queues("T", 2)
        assert await engine.rebalancer.rebalance()
        assert held(engine) == [0, 1] and engine.rebalancer.missing == set()

    run(main())


def test_lock_renewal_pauses_a_queue_that_lost_its_lock_and_kicks_it_when_regained() -> None:
    async def main() -> None:
        engine, mqs = engine_with(2, orderly=True)
        engine.broker.consumers = [ME]
        await engine.rebalancer.rebalance()
        engine.broker.held_by_others = {mqs[1]}
        await engine.rebalancer.lock_all()
        assert not engine.table[mqs[1]].pq.locked and engine.table[mqs[0]].pq.locked
        assert engine.rebalancer.lock_losses == 1
        req = engine.table[mqs[1]]
        req.pq.put(queued([0]))
        engine.broker.held_by_others = set()
        await engine.rebalancer.lock_all()
        assert req.pq.locked and req.pq.lock_lapsed, "locked again after a gap: checked before consuming on"
        await eventually_async(lambda: engine.consume_service._queues or engine.executor.pending,
                               what="the regained queue kicked")
        await engine.consume_service.stop(0.01)

    run(main())


def test_unlock_all_unlocks_every_queue_two_way_at_shutdown() -> None:
    async def main() -> None:
        engine, mqs = engine_with(2, orderly=True)
        engine.broker.consumers = [ME]
        await engine.rebalancer.rebalance()
        await engine.rebalancer.unlock_all()
        assert [(sorted(mqs_), oneway) for mqs_, oneway in engine.broker.unlocks] == [(sorted(engine.table), False)]
        assert not any(req.pq.locked for req in engine.table.values())

    run(main())
