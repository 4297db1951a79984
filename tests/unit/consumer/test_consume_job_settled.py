"""``ConsumeJob.settled``: whether an orderly job succeeded in full, which decides if a job chained behind it runs."""

from __future__ import annotations

import asyncio

from rmqrun.consumer.executor import ConsumeJob, JobResult
from rmqrun.model import MessageQueue, Status

MQ = MessageQueue("T", "broker-a", 0)


def _settled(outcome: str, verdicts: list[Status] | None = None) -> bool | None:
    async def main() -> bool | None:
        job = ConsumeJob(MQ, True, [b"r"] * 3, [0, 1, 2])
        future: asyncio.Future[JobResult] = asyncio.get_running_loop().create_future()
        future.add_done_callback(job.settled)
        if outcome == "result":
            future.set_result(JobResult(verdicts or []))
        elif outcome == "error":
            future.set_exception(RuntimeError("not run"))
            future.exception()
        else:
            future.cancel()
        await asyncio.sleep(0)  # the done callbacks run
        return job.clean
    return asyncio.run(main())


def test_only_a_job_whose_every_message_succeeded_is_clean() -> None:
    assert _settled("result", [Status.SUCCESS] * 3) is True
    assert _settled("result", [Status.SUCCESS, Status.SUSPEND, Status.NOT_RUN]) is False
    assert _settled("result", [Status.SUCCESS, Status.SUCCESS, Status.NOT_RUN]) is False
    assert _settled("error") is False
    assert _settled("cancelled") is False
