"""The pool executor does not run a job whose queue was dropped (rebalanced away) before it started.

Java checks the dropped flag when a consume request starts; rmqrun has two
places where a job can wait before it starts: in the executor (the dispatcher
said "wait": the worker's in-flight bound is reached) and in a worker's pipe,
behind the batch that worker is running. A job dropped in either place comes
back with every message NOT_RUN (the new owner consumes them; nothing counts
as handled or failed) and the handler never sees it. Real worker processes;
the handler sleeps, so the second job is still waiting when its queue drops.

The same holds for an orderly job whose queue stops holding its broker lock
while the job waits (lost at a renewal, or granted again after a gap): it comes
back NOT_RUN with no error, and its service waits for the lock and, after a
gap, checks the broker's offset (``lock_gap.py``). Without that, a supervisor
frozen past the lock's expiry ran its waiting jobs the moment it woke, behind
what another client had committed meanwhile (issue #23, key mode).
"""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace

import pytest

from rmqrun.consumer.executor import ConsumeJob
from rmqrun.consumer.process_queue import ProcessQueue
from rmqrun.model import MessageQueue, Status
from rmqrun.remoting.message import encode_stored
from rmqrun.supervisor.executor import PoolExecutor
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.supervisor.pool_config import PoolConfig
from tests.waiting import eventually_async

pytestmark = pytest.mark.timeout(90)

SKIPPED = "skipped: its queue was dropped"


def _job(queue_id: int, offsets: list[int], pq: SimpleNamespace | ProcessQueue, *,
         orderly: bool = False) -> ConsumeJob:
    mq = MessageQueue("T", "broker-a", queue_id)
    records = [bytes(encode_stored(topic="T", body=b"payload", properties={}, queue_id=queue_id, queue_offset=o))
               for o in offsets]
    return ConsumeJob(mq, orderly, records, offsets, pq=pq, under_lock=orderly)


def _locked() -> ProcessQueue:
    pq = ProcessQueue()
    pq.note_locked()
    pq.lock_lapsed = False  # a queue newly allocated: its offset was just read from the broker
    assert pq.holds_lock()
    return pq


def _executor(max_inflight_messages: int) -> PoolExecutor:
    worker = WorkerConfig("workers.misbehave:sleep", log_level="WARNING", batch_size=1, time_limit=900.0)
    return PoolExecutor(PoolConfig(worker, workers=1, boot_timeout=30.0), max_inflight_messages=max_inflight_messages)


@pytest.fixture(autouse=True)
def _slow_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RMQRUN_HANDLER_SLEEP_MS", "500")


def test_a_job_waiting_in_the_executor_is_not_run_once_its_queue_is_dropped() -> None:
    async def scenario() -> None:
        ex = _executor(max_inflight_messages=1)  # the running job fills the worker: the next one waits here
        await ex.start()
        try:
            kept, dropped = SimpleNamespace(dropped=False), SimpleNamespace(dropped=False)
            first = asyncio.ensure_future(ex.run(_job(0, [0], kept)))
            await eventually_async(lambda: ex.in_flight == 1, what="the first job with its worker")
            second = asyncio.ensure_future(ex.run(_job(1, [7], dropped)))
            await eventually_async(lambda: ex.waiting == 1, what="the second job waiting in the executor")
            dropped.dropped = True  # rebalanced away while it waits
            assert (await first).verdicts == [Status.SUCCESS]
            res = await asyncio.wait_for(second, 10)
            assert res.verdicts == [Status.NOT_RUN], f"a dropped queue's waiting job ran: {res}"
            assert res.error == SKIPPED
            # the executor still runs jobs of queues it keeps
            assert (await ex.run(_job(0, [1], kept))).verdicts == [Status.SUCCESS]
        finally:
            await ex.stop(5)
    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_job_waiting_in_a_workers_pipe_is_skipped_once_its_queue_is_dropped() -> None:
    async def scenario() -> None:
        ex = _executor(max_inflight_messages=100)
        await ex.start()
        assert ex.dispatcher is not None
        ex.dispatcher.pipeline_budget = math.inf  # pipeline up to the bound: both jobs go to the worker's pipe
        try:
            kept, dropped = SimpleNamespace(dropped=False), SimpleNamespace(dropped=False)
            first = asyncio.ensure_future(ex.run(_job(0, [0], kept)))
            second = asyncio.ensure_future(ex.run(_job(1, [5, 6], dropped)))
            await eventually_async(lambda: ex.in_flight == 2, what="both jobs with the worker")
            await eventually_async(lambda: ex.pool.workers()[0].running_batch_id is not None,
                                   what="the first job running")
            dropped.dropped = True  # the executor's sweep asks the worker to skip the queued batch
            assert (await first).verdicts == [Status.SUCCESS]
            res = await asyncio.wait_for(second, 10)
            assert res.verdicts == [Status.NOT_RUN, Status.NOT_RUN], f"a dropped queue's piped job ran: {res}"
            assert res.error == SKIPPED
        finally:
            await ex.stop(5)
    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_an_orderly_job_waiting_in_the_executor_is_not_run_once_its_lock_is_lost() -> None:
    async def scenario() -> None:
        ex = _executor(max_inflight_messages=1)  # the running job fills the worker: the next one waits here
        await ex.start()
        try:
            kept, lost = _locked(), _locked()
            first = asyncio.ensure_future(ex.run(_job(0, [0], kept, orderly=True)))
            await eventually_async(lambda: ex.in_flight == 1, what="the first job with its worker")
            second = asyncio.ensure_future(ex.run(_job(1, [7], lost, orderly=True)))
            await eventually_async(lambda: ex.waiting == 1, what="the second job waiting in the executor")
            lost.locked = False  # a renewal found another client holding the queue
            assert (await first).verdicts == [Status.SUCCESS]
            res = await asyncio.wait_for(second, 10)
            assert res.verdicts == [Status.NOT_RUN], f"a job of a queue that lost its lock started: {res}"
            assert res.error is None  # nothing broke: no pause for its lane, the lock rule decides
            lost.note_locked()  # granted again: after a gap, so still not the queue's to consume on
            assert lost.lock_lapsed
            res = await asyncio.wait_for(ex.run(_job(1, [7], lost, orderly=True)), 10)
            assert res.verdicts == [Status.NOT_RUN], f"a job started before its lock gap was settled: {res}"
            lost.lock_lapsed = False  # settled (lock_gap.settle_gap): it runs again
            assert (await ex.run(_job(1, [7], lost, orderly=True))).verdicts == [Status.SUCCESS]
        finally:
            await ex.stop(5)
    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_an_orderly_job_waiting_in_a_workers_pipe_is_skipped_once_its_lock_expires() -> None:
    async def scenario() -> None:
        ex = _executor(max_inflight_messages=100)  # orderly batches of other queues pipeline up to the bound
        await ex.start()
        try:
            kept, expiring = _locked(), _locked()
            first = asyncio.ensure_future(ex.run(_job(0, [0], kept, orderly=True)))
            second = asyncio.ensure_future(ex.run(_job(1, [5, 6], expiring, orderly=True)))
            await eventually_async(lambda: ex.in_flight == 2, what="both jobs with the worker")
            await eventually_async(lambda: ex.pool.workers()[0].running_batch_id is not None,
                                   what="the first job running")
            expiring.last_lock_timestamp -= expiring.lock_max_live_ms + 1_000  # not renewed in time
            assert (await first).verdicts == [Status.SUCCESS]
            res = await asyncio.wait_for(second, 10)
            assert res.verdicts == [Status.NOT_RUN, Status.NOT_RUN], f"a piped job ran past its lock: {res}"
        finally:
            await ex.stop(5)
    asyncio.run(asyncio.wait_for(scenario(), 60))
