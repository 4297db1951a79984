"""A puller held by flow control resumes when messages leave its queue's cache, not at a poll.

Java's puller looks again every 50 ms while a queue is over its limits; rmqrun's waits on
``ProcessQueue.room``, which every way out of the cache resolves (a finished concurrent job,
an orderly commit, a partial commit, a cleared queue), with a long recheck for what none of them
reports. Each test waits on a real loop with a recheck of an hour: only the cache shrinking can
end the wait it checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from rmqrun.consumer.process_queue import ProcessQueue
from rmqrun.consumer.puller import wait_for_room
from rmqrun.consumer.queued import QueuedMessage, QueuedRun

HOUR = 3600.0


def cached(n: int) -> ProcessQueue:
    pq = ProcessQueue()
    assert pq.put([QueuedMessage(o, 10, f"m{o}") for o in range(n)])
    return pq


def released_by(pq: ProcessQueue, shrink: Callable[[ProcessQueue], object]) -> None:
    async def main() -> None:
        waiting = asyncio.ensure_future(wait_for_room(pq, HOUR))
        for _ in range(3):  # several loop turns: nothing ends the wait but the cache shrinking
            await asyncio.sleep(0)
        assert not waiting.done() and pq.room is not None
        shrink(pq)
        await asyncio.wait_for(waiting, 10)  # bounded: a wake that never comes fails here, not in an hour
        assert pq.room is None, "the waiter is gone once it fired"

    asyncio.run(main())


def test_a_finished_concurrent_job_wakes_the_puller() -> None:
    released_by(cached(8), lambda pq: pq.remove_messages([0, 1]))


def test_a_finished_pull_run_wakes_the_puller() -> None:
    """The push path caches whole pulls as runs; a job that finished in full removes its run at once."""
    pq = ProcessQueue()
    run = QueuedRun([0, 1, 2], [10, 10, 10], [b"a", b"b", b"c"])
    assert pq.put_run(run)
    released_by(pq, lambda q: q.remove_run(run))


def test_an_orderly_commit_wakes_the_puller() -> None:
    def commit(pq: ProcessQueue) -> None:
        assert pq.take_messages(4)
        assert pq.commit() == 4

    def commit_through(pq: ProcessQueue) -> None:
        assert pq.take_messages(4)
        assert pq.commit_through(1) == 2

    released_by(cached(8), commit)
    released_by(cached(8), commit_through)


def test_a_cleared_queue_wakes_the_puller() -> None:
    released_by(cached(8), ProcessQueue.clear)


def test_taking_without_committing_leaves_it_waiting() -> None:
    """Orderly messages taken are still cached (Java's msgCount): no room is made until the commit."""
    pq = cached(8)

    async def main() -> None:
        waiting = asyncio.ensure_future(wait_for_room(pq, HOUR))
        await asyncio.sleep(0)
        assert pq.take_messages(4)
        pq.rollback()
        for _ in range(3):
            await asyncio.sleep(0)
        assert not waiting.done()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert pq.room is None, "a cancelled puller leaves no waiter behind"

    asyncio.run(main())


def test_with_no_room_made_it_looks_again_after_the_recheck() -> None:
    pq = cached(8)

    async def main() -> None:
        await asyncio.wait_for(wait_for_room(pq, 0.01), 30)
        assert pq.room is None

    asyncio.run(main())
