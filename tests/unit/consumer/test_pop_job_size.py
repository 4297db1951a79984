"""How many popped messages go into one executor job: one handler call's worth until calls are measured, up to a
pop's 32 once they are short, and back down when they grow long (so an ack waits for little beyond its own call,
and a graceful stop acks what finished)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.executor import JobResult
from rmqrun.model import Status
from rmqrun.consumer.pop_consume import JOB_MAX, PopConsumeService
from rmqrun.consumer.pop_stats import PopStats


def _service(batch: int = 1) -> PopConsumeService:
    cfg = ConsumerConfig(group="G", namesrv="127.0.0.1:9876", subscriptions={"T": "*"},
                         consume_message_batch_max_size=batch)
    return PopConsumeService(SimpleNamespace(config=cfg, pop_stats=PopStats()))  # type: ignore[arg-type]


def _finished(svc: PopConsumeService, n: int, seconds: float) -> None:
    svc._learn(n, JobResult([Status.SUCCESS] * n, handler_seconds=seconds))


def test_jobs_start_at_one_call_and_grow_only_while_calls_are_short() -> None:
    async def main() -> None:
        svc = _service()
        assert svc.job_size() == 1, "nothing measured yet: one message per job, as before"
        _finished(svc, 1, 0.00001)
        assert svc.job_size() == JOB_MAX
        for _ in range(40):
            _finished(svc, 1, 2.0)  # calls became slow: the average follows
        assert svc.job_size() == 1
        _finished(svc, 4, None)  # type: ignore[arg-type]  # no handler time known: learns nothing
        assert svc.job_size() == 1

    asyncio.run(main())


def test_a_job_is_never_smaller_than_one_handler_call() -> None:
    async def main() -> None:
        svc = _service(batch=8)
        _finished(svc, 8, 8 * 1.5)
        assert svc.job_size() == 8
        svc2 = _service(batch=8)
        _finished(svc2, 8, 8 * 0.005)  # 5 ms a message: 20 fit in the 100 ms a job aims at
        assert 8 <= svc2.job_size() < JOB_MAX

    asyncio.run(main())
