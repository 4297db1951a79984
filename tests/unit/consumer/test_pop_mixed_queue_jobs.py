"""Concurrent POP jobs of several queues (issue #32): what the pops of a ``queue_id -1`` assignment bring of
one topic goes to the workers as one job whatever queue each message came from, and each message keeps
everything that is its own: its receipt for the ack or the change of invisible time, its queue for the DLQ
and the failure lines, and its own handler call for the invisibility extension (by index in the job: two
queues may hold the same offset in one job)."""

from __future__ import annotations

import asyncio
from typing import Any

from rmqrun.consumer.pop_consume import SHORT_CALL_S, HOLD_JOBS, PopConsumeService
from rmqrun.model import MessageQueue, Status
from rmqrun.protocol.pop import POP_DELAY_LEVELS_S
from tests.fakes.engine import BROKER, FakeExecutor, FakePopEngine, config, popped
from tests.waiting import eventually_async


def _at(receipts: list[Any]) -> list[tuple[int, int]]:
    """(queue id, offset) of each receipt, sorted."""
    return sorted((r.queue_id, r.queue_offset) for r in receipts)


def test_a_pop_of_two_queues_is_one_job_and_each_message_acts_with_its_own_receipt_and_queue() -> None:
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=32, max_reconsume_times=1))
        req = engine.request()
        # the same offsets in both queues: only the queue id tells the messages apart
        engine.deliver(req, [popped(5, queue_id=1), popped(6, queue_id=1), popped(5, queue_id=2),
                             popped(6, queue_id=2, reconsume_times=1), popped(7, queue_id=2)])
        await eventually_async(lambda: len(engine.executor.pending) == 1, what="one job of both queues")
        job, _ = engine.executor.pending[0]
        assert job.mq == MessageQueue("T", BROKER, -1), "a job of several queues stands for the assignment"
        assert job.offsets == [5, 6, 5, 6, 7], "queue by queue, each queue's in offset order (as a pop answers)"
        view_queues = [e.message.queue_id for e in job.pq.entries]
        assert view_queues == [1, 1, 2, 2, 2]
        # q1@5 ok, q1@6 ok, q2@5 fails (delayed), q2@6 fails at its limit (DLQ), q2@7 undecodable (DLQ)
        engine.executor.finish([Status.SUCCESS, Status.SUCCESS, Status.RECONSUME_LATER, Status.RECONSUME_LATER,
                                Status.UNDECODABLE])
        await eventually_async(lambda: req.pq.wait_ack_count == 0 and not engine.service.in_flight,
                               what="every message settled")
        client = engine.pop_client
        assert _at(client.changed_receipts) == [(2, 5)], "the delay names the failed message's own receipt"
        assert client.changed == [(5, POP_DELAY_LEVELS_S[0] * 1000)]
        assert engine.send_back.sent == [(6, 0, 1)]
        (failure,) = engine.send_back.failures
        assert failure.mq == MessageQueue("T", BROKER, 2), "its failure names its own queue, not the job's"
        assert engine.undecodable == [(MessageQueue("T", BROKER, 2), 7, None)]
        assert _at(client.acked_receipts) == [(1, 5), (1, 6), (2, 6), (2, 7)], \
            "each success and each dead-lettered message acked once, with its own receipt"
        assert engine.pop_stats.dead_lettered == 2 and engine.stats.failed == 2

    asyncio.run(main())


def test_a_job_of_one_queue_still_names_that_queue() -> None:
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=32))
        req = engine.request()
        engine.deliver(req, [popped(3, queue_id=4), popped(2, queue_id=4)])
        await eventually_async(lambda: engine.executor.pending, what="the job")
        assert engine.executor.pending[0][0].mq == MessageQueue("T", BROKER, 4)
        engine.executor.finish_all()
        await eventually_async(lambda: not engine.service.in_flight, what="acked")

    asyncio.run(main())


def test_a_retry_topics_messages_are_a_job_of_their_own() -> None:
    """A pop may bring the pop retry topic's messages beside the topic's: they are acked under another topic,
    so they never share a job (and its one topic on the pipe) with the topic's own."""
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=32))
        req = engine.request()
        engine.deliver(req, [popped(1, queue_id=0), popped(9, topic="%RETRY%G_T", queue_id=0, retry=True),
                             popped(2, queue_id=1)])
        await eventually_async(lambda: len(engine.executor.pending) == 2, what="two jobs")
        jobs = sorted((j.mq.topic, j.mq.queue_id, list(j.offsets)) for j, _ in engine.executor.pending)
        assert jobs == [("%RETRY%G_T", 0, [9]), ("T", -1, [1, 2])]
        engine.executor.finish_all()
        await eventually_async(lambda: not engine.service.in_flight, what="acked")

    asyncio.run(main())


def test_only_the_begun_call_is_extended_when_two_queues_share_its_offset() -> None:
    """The executor names begun calls by index in the job: of q1@5 (its call begun) and q2@5 (waiting behind
    it), only q1@5 is extended; q2@5 keeps its pop's clock. An executor that names calls by offset alone
    cannot tell them apart: both are taken as begun."""
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=32,
                                      pop_invisible_time_ms=60_000))
        req = engine.request()
        engine.deliver(req, [popped(5, queue_id=2), popped(5, queue_id=1)])
        await eventually_async(lambda: engine.executor.pending, what="the job")
        job, _ = engine.executor.pending[0]
        view = job.pq
        begun_first = view.entries[0]
        engine.executor.handler_call_indexes = lambda v: {0: 1.0} if v is view else {}  # type: ignore[attr-defined]
        engine.executor.handler_calls = lambda v: {5: 1.0} if v is view else {}  # type: ignore[attr-defined]
        now = begun_first.receipt.pop_time + 50_000  # past two thirds of 60 s
        assert engine.service.extend_due(now) == 1
        await eventually_async(lambda: engine.pop_client.changed_receipts, what="the extension")
        assert [(r.queue_id, r.queue_offset) for r in engine.pop_client.changed_receipts] == \
            [(begun_first.message.queue_id, 5)]
        assert view.entries[1].extensions == 0
        del engine.executor.handler_call_indexes  # type: ignore[attr-defined]
        await eventually_async(lambda: begun_first.extending is None, what="the extension settled")
        engine.service.extend_due(now)
        await eventually_async(lambda: view.entries[1].extensions == 1,
                               what="by offset only: the other queue's message at 5 taken as begun as well")
        engine.executor.finish_all()
        await eventually_async(lambda: not engine.service.in_flight, what="acked")

    asyncio.run(main())


def test_a_lane_holds_one_job_per_worker_while_calls_are_shorter_than_the_supervisors_cost() -> None:
    """Short calls (a no-op's): one job per worker at the executor, what pops bring meanwhile waits and goes as
    one job; slower calls (or none measured yet): ``HOLD_JOBS`` per worker at once, so no worker waits for a
    pop when its job ends."""
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop"), executor=FakeExecutor(parallelism=2))
        svc: PopConsumeService = engine.service
        assert svc.hold() == 2 * HOLD_JOBS == 4
        assert PopConsumeService(FakePopEngine(config(consume_mode="pop"), executor=FakeExecutor(parallelism=1))
                                 ).hold() == HOLD_JOBS == 2
        req = engine.request()
        engine.deliver(req, [popped(100)])
        await eventually_async(lambda: engine.executor.pending, what="the first job")
        engine.executor.finish(Status.SUCCESS, handler_seconds=SHORT_CALL_S / 2)
        await eventually_async(lambda: not engine.service.in_flight, what="the first job settled")
        assert svc.hold() == 2, "short calls: one job per worker"
        for offset, queue_id in ((1, 0), (2, 1)):
            engine.deliver(req, [popped(offset, queue_id=queue_id)])
            await eventually_async(lambda: len(engine.executor.started) == offset + 1, what=f"job {offset}")
        engine.deliver(req, [popped(3, queue_id=2)])
        await asyncio.sleep(0)
        engine.deliver(req, [popped(4, queue_id=3)])
        for _ in range(3):
            await asyncio.sleep(0)
        assert len(engine.executor.started) == 3, "a job out per worker: the others wait for one to come back"
        engine.executor.finish(Status.SUCCESS, handler_seconds=SHORT_CALL_S / 2)
        await eventually_async(lambda: len(engine.executor.started) == 4, what="the merged job")
        assert engine.executor.started[-1].offsets == [3, 4]
        while engine.executor.pending:
            engine.executor.finish(Status.SUCCESS, handler_seconds=SHORT_CALL_S * 100)
        await eventually_async(lambda: not engine.service.in_flight, what="acked")
        assert svc.hold() == 4, "slower calls again: two jobs per worker"
        assert engine.pop_client.all_acked == [1, 2, 3, 4, 100]

    asyncio.run(main())


def test_the_pops_answered_in_one_turn_of_the_loop_make_one_job() -> None:
    """Pop answers read together (one read of the broker's socket) are flushed at the end of the turn: one job
    of both, not one job each, even with no job of the lane out."""
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=32))
        req = engine.request()
        engine.deliver(req, [popped(1, queue_id=0), popped(2, queue_id=0)])
        engine.deliver(req, [popped(1, queue_id=1)])
        await eventually_async(lambda: engine.executor.pending, what="the job")
        for _ in range(3):
            await asyncio.sleep(0)
        assert [(len(j), j.mq.queue_id) for j in engine.executor.started] == [(3, -1)]
        engine.executor.finish_all()
        await eventually_async(lambda: not engine.service.in_flight, what="acked")
        assert _at(engine.pop_client.acked_receipts) == [(0, 1), (0, 2), (1, 1)]

    asyncio.run(main())


class _SubmitExecutor(FakeExecutor):
    """A fake executor with the pool's ``submit``: what it was handed, in the order and turn it was handed."""

    def __init__(self) -> None:
        super().__init__()
        self.submitted: list[list[int]] = []

    def submit(self, job: Any) -> "asyncio.Future[Any]":
        self.submitted.append(list(job.offsets))
        return asyncio.ensure_future(self.run(job))


def test_a_lanes_job_reaches_an_executor_with_submit_in_the_turn_the_lane_is_flushed() -> None:
    """The lane's flush (two steps after the hand-over: the turn's pops are written first) hands its job to the
    executor itself; a task waits for the outcome. Handed over from the task's first step, the job reached the
    workers a turn later, with its messages' flow-control slots held through it (a no-op drain's pace)."""
    async def main() -> None:
        executor = _SubmitExecutor()
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=32), executor=executor)
        req = engine.request()
        engine.deliver(req, [popped(1), popped(2)])
        assert executor.submitted == [], "flushed later, not as the pop is handed over"
        await asyncio.sleep(0)  # the step in which this turn's pops are written (the connection's flush)
        assert executor.submitted == [], "the pops this turn sent are written before the messages are handed over"
        await asyncio.sleep(0)  # the flush runs, and with it the hand-over
        assert executor.submitted == [[1, 2]]
        await eventually_async(lambda: executor.pending, what="the job running")
        executor.finish(Status.SUCCESS)
        await eventually_async(lambda: not engine.service.in_flight, what="acked")
        assert engine.pop_client.all_acked == [1, 2]
        assert req.pq.wait_ack_count == 0

    asyncio.run(main())


def test_a_lanes_job_with_nothing_left_to_run_gives_its_place_back() -> None:
    """A job whose every message lapsed before the hand-over runs nothing, and its lane does not count it as
    out: with calls short (one job held by the one worker), the next pop's messages go to the executor at once."""
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=32),
                               executor=FakeExecutor(parallelism=1))
        svc: PopConsumeService = engine.service
        req = engine.request()
        engine.deliver(req, [popped(100)])
        await eventually_async(lambda: engine.executor.pending, what="the first job")
        engine.executor.finish(Status.SUCCESS, handler_seconds=SHORT_CALL_S / 2)
        await eventually_async(lambda: not svc.in_flight, what="the first job settled")
        assert svc.hold() == 1
        engine.deliver(req, [popped(1, invisible_ms=-1)])
        await eventually_async(lambda: engine.pop_stats.expired == 1, what="the lapsed message left out")
        engine.deliver(req, [popped(2)])
        await eventually_async(lambda: engine.executor.pending, what="the next pop's job")
        assert engine.executor.started[-1].offsets == [2]
        engine.executor.finish(Status.SUCCESS)
        await eventually_async(lambda: not svc.in_flight, what="acked")
        assert engine.pop_client.all_acked == [2, 100] and req.pq.wait_ack_count == 0

    asyncio.run(main())
