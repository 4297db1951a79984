"""The POP consume service's outcome per message (``pop_consume.PopConsumeService._process_result``): each failed
message goes on with its own error, never the job's first (issue #31 defect 3)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.executor import JobResult
from rmqrun.consumer.pop_consume import PopConsumeService
from rmqrun.consumer.pop_stats import PopStats
from rmqrun.model import MessageQueue, Status


def test_each_failed_message_keeps_its_own_error() -> None:
    async def main() -> None:
        cfg = ConsumerConfig(group="G", namesrv="127.0.0.1:9876", subscriptions={"T": "*"})
        engine = SimpleNamespace(config=cfg, pop_stats=PopStats(), stats=SimpleNamespace(failed=0))
        svc = PopConsumeService(engine)  # type: ignore[arg-type]
        failed: list[tuple[Any, str | None]] = []
        acked: list[Any] = []

        async def fail(pq: Any, mq: Any, entry: Any, level: int, error: str | None) -> None:
            failed.append((entry, error))

        async def ack_all(pq: Any, entries: list[Any]) -> None:
            acked.extend(entries)

        svc._failed = fail  # type: ignore[method-assign]
        svc.acks = SimpleNamespace(ack_all=ack_all)  # type: ignore[assignment]
        result = JobResult([Status.RECONSUME_LATER, Status.SUCCESS, Status.RECONSUME_LATER,
                            Status.RECONSUME_LATER], error="c-7 failed",
                           errors={0: "c-7 failed", 2: "c-107 failed"})
        req = SimpleNamespace(pq=None)
        await svc._process_result(req, MessageQueue("T", "b", 0), ["c-7", "c-57", "c-107", "c-157"],  # type: ignore
                                  result)
        assert failed == [("c-7", "c-7 failed"), ("c-107", "c-107 failed"), ("c-157", None)]
        assert acked == ["c-57"] and engine.stats.failed == 3

    asyncio.run(main())


def test_an_executor_that_reports_one_error_per_job_still_names_it() -> None:
    result = JobResult([Status.RECONSUME_LATER] * 2, error="boom")
    assert result.error_of(0) == result.error_of(1) == "boom"
    assert JobResult([Status.RECONSUME_LATER] * 2, error="a", errors={0: "a"}).error_of(1) is None


def _entry(offset: int, pop_time: int) -> Any:
    from rmqrun.consumer.pop_queue import PopEntry
    from rmqrun.protocol.pop import ReceiptHandle
    receipt = ReceiptHandle.parse(f"0 {pop_time} 20000 0 0 b 0 {offset}")
    return PopEntry(memoryview(b""), "T", "T", receipt, 0)


def test_only_messages_whose_call_began_are_extended_as_java_extends_none() -> None:
    """Issue #32: a message waiting for a worker keeps its pop's clock, so a killed instance's messages come back
    one invisible time after their pop (not 5/3 of it after an extension); a long call is still extended."""
    from rmqrun.consumer.pop_orderly import PopOrderlyConsumeService
    from rmqrun.consumer.pop_queue import PopJobView, PopProcessQueue

    async def main() -> None:
        cfg = ConsumerConfig(group="G", namesrv="127.0.0.1:9876", subscriptions={"T": "*"})
        pq = PopProcessQueue(MessageQueue("T", "b", -1))
        running, waiting, queued = _entry(5, 1000), _entry(6, 1000), _entry(7, 1000)
        pq.add([running, waiting, queued])
        view = PopJobView(pq, [running, waiting])  # a job of two: the first's call has begun
        executor = SimpleNamespace(handler_calls=lambda v: {5: 123.0} if v is view else {})
        engine = SimpleNamespace(config=cfg, pop_stats=PopStats(), executor=executor,
                                 pop_requests=lambda: [SimpleNamespace(pq=pq)])
        now = 1000 + 15_000  # past two thirds of 20 s
        for cls, want in ((PopConsumeService, [running]), (PopOrderlyConsumeService, [running, waiting, queued])):
            svc = cls(engine)  # type: ignore[arg-type]
            svc._views.add(view)
            extended: list[Any] = []

            async def extend(entry: Any, extended: list[Any] = extended) -> None:
                extended.append(entry)
                entry.extending = None
            svc._extend = extend  # type: ignore[method-assign]
            assert svc.extend_due(now) == len(want)
            await asyncio.sleep(0)
            assert sorted(e.message.queue_offset for e in extended) == [e.message.queue_offset for e in want]
        # an executor that cannot say which calls began: every message in flight is extended, as before
        svc = PopConsumeService(SimpleNamespace(config=cfg, pop_stats=PopStats(), executor=object(),  # type: ignore
                                                pop_requests=lambda: [SimpleNamespace(pq=pq)]))
        svc._extend = lambda entry: asyncio.sleep(0)  # type: ignore[method-assign,assignment]
        assert svc.extend_due(now) == 3

    asyncio.run(main())


def test_a_job_whose_messages_lapsed_while_waiting_reads_as_dropped() -> None:
    """Java checks isPopTimeout as a ConsumeRequest starts: the executor must not start a job past it."""
    from rmqrun.consumer.pop_queue import PopJobView, PopProcessQueue, now_ms
    pq = PopProcessQueue(MessageQueue("T", "b", -1))
    fresh, old = _entry(1, now_ms()), _entry(2, now_ms() - 60_000)
    assert not PopJobView(pq, [fresh]).dropped
    assert PopJobView(pq, [fresh, old]).dropped
    pq.dropped = True
    assert PopJobView(pq, [fresh]).dropped
