"""The concurrent consume service (``consume_concurrently.py``) on a fake engine: no broker, real logic.

Each test hands the real service pulled batches as the puller would, finishes the fake executor's jobs
in the order the test picks, and reads what reached "the broker": the committed offset, the send-backs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rmqrun.consumer import defaults as d
from rmqrun.consumer.executor import JobResult
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


async def _jobs(engine: FakeEngine, n: int) -> None:
    await eventually_async(lambda: len(engine.executor.pending) == n, what=f"{n} jobs handed to the executor")


def test_the_commit_waits_for_the_oldest_unfinished_message() -> None:
    async def main() -> None:
        engine = FakeEngine()
        svc = engine.consume_service
        svc.start()
        req = engine.request(MQ)
        for offset in range(4):  # four pulls, four jobs
            engine.deliver(req, queued([offset]))
        await _jobs(engine, 4)
        ex = engine.executor
        for job in [j for j, _ in ex.pending if j.offsets[0] != 0]:  # 1, 2, 3 finish first
            ex.finish(job=job)
        await eventually_async(lambda: len(engine.stats.jobs) == 3, what="three results applied")
        assert engine.offset_store.read_memory(MQ) == 0, "offset 0 still runs: nothing past it is committed"
        ex.finish()
        await eventually_async(lambda: engine.offset_store.read_memory(MQ) == 4, what="commit past offset 3")
        await engine.offset_store.persist(MQ)
        assert engine.broker.commits == [(MQ, 4)]
        assert req.pq.msg_count == 0
        await svc.stop(1)

    run(main())


def test_a_failure_is_sent_back_and_then_counts_as_done() -> None:
    async def main() -> None:
        engine = FakeEngine(config(max_reconsume_times=5))
        svc = engine.consume_service
        req = engine.request(MQ)
        engine.deliver(req, queued([0, 1, 2]))
        await _jobs(engine, 1)
        engine.executor.finish([Status.SUCCESS, Status.RECONSUME_LATER, Status.SUCCESS],
                               delay_levels=[0, 4, 0], errors={1: "boom"})
        await eventually_async(lambda: engine.offset_store.read_memory(MQ) == 3, what="commit past the batch")
        assert engine.send_back.sent == [(1, 4, 5)], "offset 1 with the handler's delay level and the limit"
        assert engine.send_back.failures[0].error == "boom"
        assert engine.stats.failed == 1
        await svc.stop(1)

    run(main())


def test_a_refused_send_back_keeps_the_message_and_consumes_it_again_counted(monkeypatch: pytest.MonkeyPatch
                                                                              ) -> None:
    monkeypatch.setattr(d, "SEND_BACK_FAILED_RESUBMIT_DELAY_MS", 1)

    async def main() -> None:
        engine = FakeEngine()
        engine.send_back.accept = False
        svc = engine.consume_service
        req = engine.request(MQ)
        engine.deliver(req, queued([0, 1]))
        await _jobs(engine, 1)
        engine.executor.finish([Status.RECONSUME_LATER, Status.SUCCESS])
        await _jobs(engine, 1)  # offset 0 again, locally
        again = engine.executor.pending[0][0]
        assert again.offsets == [0] and reconsume_times(again.records[0]) == 1
        assert engine.offset_store.read_memory(MQ) == 0, "the commit is held at the message not yet done"
        engine.executor.finish()
        await eventually_async(lambda: engine.offset_store.read_memory(MQ) == 2, what="commit after the redo")
        await svc.stop(1)

    run(main())


def test_broadcasting_drops_a_failure_without_a_send_back() -> None:
    async def main() -> None:
        engine = FakeEngine(config(message_model="BROADCASTING"))
        req = engine.request(MQ)
        engine.deliver(req, queued([0, 1]))
        await _jobs(engine, 1)
        engine.executor.finish([Status.RECONSUME_LATER, Status.SUCCESS])
        await eventually_async(lambda: engine.offset_store.read_memory(MQ) == 2, what="commit past the failure")
        assert engine.send_back.sent == []
        await engine.consume_service.stop(1)

    run(main())


def test_an_undecodable_record_goes_to_the_dlq_unhandled() -> None:
    async def main() -> None:
        engine = FakeEngine()
        req = engine.request(MQ)
        engine.deliver(req, queued([0, 1]))
        await _jobs(engine, 1)
        engine.executor.finish([Status.UNDECODABLE, Status.SUCCESS], errors={0: "bad zlib"})
        await eventually_async(lambda: engine.offset_store.read_memory(MQ) == 2, what="commit past it")
        assert engine.undecodable == [(MQ, 0, "bad zlib")] and engine.send_back.sent == []
        await engine.consume_service.stop(1)

    run(main())


def test_a_result_for_a_dropped_queue_is_discarded() -> None:
    async def main() -> None:
        engine = FakeEngine()
        req = engine.request(MQ)
        engine.deliver(req, queued([0, 1]))
        await _jobs(engine, 1)
        req.pq.dropped = True  # rebalanced away while the job ran
        engine.executor.finish(Status.RECONSUME_LATER)
        await eventually_async(lambda: not engine.consume_service.in_flight, what="the job's task to end")
        assert engine.offset_store.read_memory(MQ) == -1 and engine.send_back.sent == []
        # a job of the dropped queue that has not started is not run at all
        engine.deliver(req, queued([2]))
        await eventually_async(lambda: not engine.consume_service.in_flight, what="the skipped job")
        assert [j.offsets for j in engine.executor.started] == [[0, 1]]
        assert engine.stats.jobs == [(2, JobResult([Status.RECONSUME_LATER] * 2))]

    run(main())


def test_an_executor_that_cannot_run_leaves_the_messages_cached() -> None:
    async def main() -> None:
        engine = FakeEngine()
        engine.executor.fail_with = RuntimeError("shutting down")
        req = engine.request(MQ)
        engine.deliver(req, queued([0, 1]))
        await eventually_async(lambda: not engine.consume_service.in_flight, what="the job's task to end")
        assert req.pq.msg_count == 2 and engine.offset_store.read_memory(MQ) == -1

    run(main())


def test_stop_waits_within_its_grace_for_the_send_back_a_result_starts() -> None:
    """A result that comes while the service stops may start work of its own (its failures' send-backs):
    the stop waits for that too, so the failure is sent back and the batch committed past, not abandoned."""
    async def main() -> None:
        engine = FakeEngine()
        svc = engine.consume_service
        gate = asyncio.Event()
        sent_back = engine.send_back.send_back

        async def slow_send_back(*args: Any, **kw: Any) -> bool:
            await gate.wait()
            return await sent_back(*args, **kw)

        engine.send_back.send_back = slow_send_back  # type: ignore[method-assign]
        req = engine.request(MQ)
        engine.deliver(req, queued([0, 1]))
        await _jobs(engine, 1)
        stopping = asyncio.ensure_future(svc.stop(30))
        await asyncio.sleep(0)
        engine.executor.finish([Status.RECONSUME_LATER, Status.SUCCESS])
        await eventually_async(lambda: svc.in_flight == 1 and not engine.executor.pending,
                               what="the result handed to its send-back")
        assert not stopping.done(), "the stop waits for the send-back"
        gate.set()
        await stopping
        assert [s[0] for s in engine.send_back.sent] == [0]
        assert engine.offset_store.read_memory(MQ) == 2 and svc.in_flight == 0

    run(main())
