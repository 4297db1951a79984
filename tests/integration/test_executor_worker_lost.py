"""A batch waiting in the pipe of a worker that dies is run again by the replacement, never counted as done.

Crash isolation handles the batch the dead worker was *running* (its poison
message is failed alone); the batches queued behind it in the same pipe never
started, so they must go back to the front of the line and really run. Real
worker processes: the first job hangs in its handler call, the second waits
behind it, the worker is killed with SIGKILL, and the second job's messages
must then be recorded by the handler in the replacement process before the
job reports SUCCESS.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest

from rmqrun.consumer.executor import ConsumeJob
from rmqrun.model import MessageQueue, Status
from rmqrun.remoting.message import encode_stored
from rmqrun.supervisor.executor import PoolExecutor
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.supervisor.pool_config import PoolConfig
from tests.integration.signals_kit import read_deliveries
from tests.waiting import eventually_async

pytestmark = pytest.mark.timeout(90)


def _job(queue_id: int, idxs: list[int]) -> ConsumeJob:
    mq = MessageQueue("T", "broker-a", queue_id)
    records = [bytes(encode_stored(topic="T", body=b"payload", properties={"idx": str(i)}, queue_id=queue_id,
                                   queue_offset=i)) for i in idxs]
    return ConsumeJob(mq, False, records, list(idxs), pq=SimpleNamespace(dropped=False))


def test_a_batch_queued_behind_a_killed_call_runs_in_the_replacement(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "deliveries.txt"
    monkeypatch.setenv("PROBE_RECORD", str(record))
    monkeypatch.setenv("PROBE_HANG_IDX", "0")  # the first delivery of idx 0 sleeps for an hour

    async def scenario() -> None:
        worker = WorkerConfig("tests.integration.handlers.probe_handler:hang", log_level="WARNING", batch_size=1,
                              time_limit=900.0)
        ex = PoolExecutor(PoolConfig(worker, workers=1, boot_timeout=30.0), max_inflight_messages=100)
        await ex.start()
        assert ex.dispatcher is not None
        ex.dispatcher.pipeline_budget = math.inf  # the second job goes to the busy worker's pipe
        try:
            hung = asyncio.ensure_future(ex.run(_job(0, [0])))
            queued = asyncio.ensure_future(ex.run(_job(1, [5, 6])))
            await eventually_async(lambda: ex.in_flight == 2, what="both jobs with the worker")
            await eventually_async(lambda: record.exists() and any(d.event == "start" for d in read_deliveries(record)),
                                   what="the hanging call to begin")
            (worker,) = ex.pool.workers()
            os.kill(worker.pid, signal.SIGKILL)
            # the call it died in is the message's doing: failed alone (retried / dead-lettered later)
            assert (await asyncio.wait_for(hung, 30)).verdicts == [Status.RECONSUME_LATER]
            res = await asyncio.wait_for(queued, 30)
            assert res.verdicts == [Status.SUCCESS, Status.SUCCESS]
            ran = [(d.idx, d.pid) for d in read_deliveries(record) if d.event == "ok"]
            assert sorted(i for i, _ in ran) == [5, 6], f"the queued job counted as done without running: {ran}"
            assert all(pid != worker.pid for _, pid in ran), "it ran in the replacement, not the dead worker"
        finally:
            await ex.stop(5)
    asyncio.run(asyncio.wait_for(scenario(), 60))
