"""A whole pull's job hands the statistics the store times the puller's scan read (issue #38): the concurrent and
the orderly service pass ``QueuedRun.stamps`` as ``stored``, one per record in the job's order, so the
store → handler histogram counts what reading every record again would count, without reading them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rmqrun.consumer.executor import JobResult
from rmqrun.consumer.oldest import store_timestamp_ms
from rmqrun.consumer.queued import QueuedRun
from rmqrun.model import MessageQueue, Status
from rmqrun.remoting.message import encode_stored, scan_columns
from tests.fakes.engine import FakeCounters, FakeEngine, config
from tests.waiting import eventually_async

MQ = MessageQueue("T", "broker-a", 0)
STAMPS = [1_700_000_000_000, 0, 1_700_000_000_900, 1_699_999_999_000]
BORN = ["10.0.0.1:5", "10.0.0.1:5", "[::1]:5", "10.0.0.1:5"]  # an IPv6 born host moves the stamp


class RecordingCounters(FakeCounters):
    """The fake counters, keeping what each job's ``stored`` was."""

    def __init__(self) -> None:
        super().__init__()
        self.stored: list[list[int] | None] = []
        self.records: list[list[Any]] = []

    def record(self, n: int, elapsed: float, result: JobResult, records: Any = (), stored: Any = None) -> None:
        super().record(n, elapsed, result, records, stored)
        self.stored.append(None if stored is None else list(stored))
        self.records.append(list(records))


def _pulled(first: int) -> QueuedRun:
    body = b"".join(bytes(encode_stored(topic="T", body=b"x", queue_offset=first + i, store_timestamp=ts,
                                        born_host=born)) for i, (ts, born) in enumerate(zip(STAMPS, BORN)))
    return QueuedRun(*scan_columns(body))


@pytest.mark.parametrize("orderly", [False, True])
def test_a_whole_pull_s_job_counts_the_store_times_its_scan_read(orderly: bool) -> None:
    async def main() -> None:
        engine = FakeEngine(config(orderly=orderly, consume_message_batch_max_size=len(STAMPS)))
        engine.stats = counters = RecordingCounters()
        svc = engine.consume_service
        svc.start()
        req = engine.request(MQ)
        run = _pulled(0)
        req.pq.put_run(run)
        svc.submit_run(req, run)
        await eventually_async(lambda: len(engine.executor.pending) == 1, what="the pull's job handed over")
        engine.executor.finish()
        await eventually_async(lambda: len(counters.stored) == 1, what="the job counted")
        assert counters.stored[0] is not None, "the run's store times are handed over"
        read_again = [store_timestamp_ms(r) or 0 for r in counters.records[0]]
        assert counters.stored[0] == read_again == STAMPS
        await svc.stop(1)

    asyncio.run(main())


def test_a_job_of_single_messages_hands_no_store_times() -> None:
    """Entries (a run split, a redelivery) carry no run's stamps: the statistics read the records."""
    async def main() -> None:
        engine = FakeEngine(config())
        engine.stats = counters = RecordingCounters()
        svc = engine.consume_service
        svc.start()
        req = engine.request(MQ)
        engine.deliver(req, _pulled(10).entries())
        await eventually_async(lambda: len(engine.executor.pending) == 1, what="the job handed over")
        engine.executor.finish(Status.SUCCESS)
        await eventually_async(lambda: len(counters.stored) == 1, what="the job counted")
        assert counters.stored == [None] and len(counters.records[0]) == len(STAMPS)
        await svc.stop(1)

    asyncio.run(main())
