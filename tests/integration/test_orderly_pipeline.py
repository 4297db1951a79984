"""Orderly pipelining: a queue's next job waits behind the running one in its worker's pipe.

The orderly service hands a queue's next job over while its current one runs
(``ConsumeJob.after``); the executor sends it to the same worker, chained, and
the worker runs it only if the job ahead ran there with every message SUCCESS.
These tests drive the pool executor directly (real worker processes) so that
the chain is certainly in place when the job ahead fails, crashes or loses its
queue's lock; one end-to-end test checks the retry order through the engine.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from rmqrun.consumer.executor import ConsumeJob, JobResult
from rmqrun.model import MessageQueue, Status
from rmqrun.remoting.message import encode_stored
from rmqrun.supervisor.executor import PoolExecutor
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.supervisor.pool_config import PoolConfig
from tests.integration.engine_kit import Running, broker, committed_offsets, consumer_config, pool_config, produce, \
    wait_for
from tests.waiting import eventually_async

pytestmark = pytest.mark.timeout(180)

S, SUSPEND, NOT_RUN = Status.SUCCESS, Status.SUSPEND, Status.NOT_RUN
MQ = MessageQueue("T", "broker-a", 0)


def _job(offsets: list[int], pq: SimpleNamespace, after: ConsumeJob | None = None, still_owned=None) -> ConsumeJob:
    records = [bytes(encode_stored(topic="T", body=b"payload", properties={}, queue_id=0, queue_offset=o))
               for o in offsets]
    return ConsumeJob(MQ, True, records, offsets, pq=pq, after=after, still_owned=still_owned)


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "calls.txt"
    monkeypatch.setenv("PIPE_RECORD", str(path))
    return path


def _calls(path: Path) -> list[tuple[str, int, int]]:
    if not path.exists():
        return []
    return [(e, int(o), int(p)) for e, o, p in (line.split() for line in path.read_text().splitlines())]


async def _pair(ex: PoolExecutor, first: list[int], second: list[int],
                still_owned=None) -> tuple["asyncio.Future[JobResult]", "asyncio.Future[JobResult]"]:
    """The first job, then the second chained behind it while it runs (both with the worker)."""
    pq = SimpleNamespace(dropped=False)
    head = _job(first, pq)
    a = asyncio.ensure_future(ex.run(head))
    await eventually_async(lambda: ex.in_flight == 1, what="the first job with its worker")
    b = asyncio.ensure_future(ex.run(_job(second, pq, after=head, still_owned=still_owned)))
    await eventually_async(lambda: ex.in_flight == 2 or b.done(), what="the second job chained behind it")
    assert ex.in_flight == 2, "the second job did not go behind the first"
    return a, b


def _run(scenario, handler: str = "tests.integration.handlers.pipeline_handler:handle", workers: int = 2) -> None:
    async def main() -> None:
        worker = WorkerConfig(handler, log_level="WARNING", batch_size=1, time_limit=900.0)
        ex = PoolExecutor(PoolConfig(worker, workers=workers, boot_timeout=30.0))
        await ex.start()
        try:
            await scenario(ex)
        finally:
            await ex.stop(5)
    asyncio.run(asyncio.wait_for(main(), 150))


def test_a_chained_job_runs_after_its_queues_job_on_the_same_worker(record: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIPE_SLEEP_MS", "50")

    async def scenario(ex: PoolExecutor) -> None:
        a, b = await _pair(ex, [0, 1, 2, 3], [4, 5, 6, 7])
        assert (await a).verdicts == [S] * 4
        assert (await b).verdicts == [S] * 4
        calls = _calls(record)
        assert [o for e, o, _ in calls if e == "ok"] == list(range(8))
        assert len({pid for _, _, pid in calls}) == 1, "the chained job ran on another worker"
    _run(scenario)


def test_a_failure_in_the_middle_of_a_pipeline_runs_nothing_after_it(record: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIPE_SLEEP_MS", "50")
    monkeypatch.setenv("PIPE_FAIL", "2")

    async def scenario(ex: PoolExecutor) -> None:
        a, b = await _pair(ex, [0, 1, 2, 3, 4], [5, 6, 7, 8, 9])
        assert (await a).verdicts == [S, S, SUSPEND, NOT_RUN, NOT_RUN]
        res = await b
        assert res.verdicts == [NOT_RUN] * 5, f"the job behind a failure ran: {res}"
        assert [o for e, o, _ in _calls(record) if e == "start"] == [0, 1, 2]
    _run(scenario)


def test_a_crash_in_the_middle_of_a_pipeline_fails_that_message_alone(record: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIPE_SLEEP_MS", "50")
    monkeypatch.setenv("PIPE_CRASH", "2")

    async def scenario(ex: PoolExecutor) -> None:
        a, b = await _pair(ex, [0, 1, 2, 3, 4], [5, 6, 7, 8, 9])
        first = await asyncio.wait_for(a, 60)
        # what ran before the crash keeps its result (handled once); the crashing message is failed alone
        # (run again alone, it kills its worker again); nothing after it runs, in this job or the next
        assert first.verdicts == [S, S, SUSPEND, NOT_RUN, NOT_RUN], first
        assert (await asyncio.wait_for(b, 60)).verdicts == [NOT_RUN] * 5
        calls = _calls(record)
        assert [o for e, o, _ in calls if e == "ok"] == [0, 1]
        assert [o for e, o, _ in calls if e == "start"] == [0, 1, 2, 2]
        assert ex.poison_messages == 1
    _run(scenario)


def test_a_chained_job_is_not_run_once_its_queues_lock_is_lost(record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIPE_SLEEP_MS", "400")

    async def scenario(ex: PoolExecutor) -> None:
        owned = [True]
        a, b = await _pair(ex, [0], [1, 2], still_owned=lambda: owned[0])
        await eventually_async(lambda: any(e == "start" for e, _, _ in _calls(record)), what="the first job's call")
        owned[0] = False  # the lock lapses while the chained job waits in the worker's pipe
        assert (await a).verdicts == [S]
        assert (await b).verdicts == [NOT_RUN, NOT_RUN]
        await asyncio.sleep(0.5)
        assert [o for e, o, _ in _calls(record) if e == "start"] == [0], "a job ran without its queue's lock"
    _run(scenario)


def test_orderly_retries_failures_in_place_with_jobs_pipelined(tmp_path: Path, record: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: a backlog cached on one queue (its first call is slow), so its jobs go pipelined; two
    messages fail once in the middle. Each runs again first, nothing after it overtakes it, all once."""
    monkeypatch.setenv("PIPE_SLOW", "0")
    monkeypatch.setenv("PIPE_FAIL", "100,250")
    n = 400

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "OP", n)
            cfg = consumer_config(eb.namesrv_address, "GOP", "OP", orderly=True, suspend_current_queue_time_ms=100)
            async with Running(cfg, pool_config("tests.integration.handlers.pipeline_handler:handle", workers=2)) as r:
                await wait_for(lambda: len([c for c in _calls(record) if c[0] == "ok"]) >= n, what=f"{n} successes")
                engine = r.supervisor.engine
                assert engine is not None
                service = engine.consume_service
                assert service.chained_jobs > 1, "no job was pipelined: the test shows nothing about pipelining"
                assert await r.stop() == 0
            calls = _calls(record)
            assert [o for e, o, _ in calls if e == "ok"] == list(range(n))
            assert [o for e, o, _ in calls if e == "fail"] == [100, 250]
            assert (await committed_offsets(eb, "GOP", "OP"))[0] == n
    asyncio.run(asyncio.wait_for(main(), 170))
