"""The POP consume service's outcome per message (``pop_consume.PopConsumeService._process_result``): each failed
message goes on with its own error, never the job's first (issue #31 defect 3)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.executor import JobResult
from rmqrun.consumer.pop_consume import PopConsumeService, PopStats
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
