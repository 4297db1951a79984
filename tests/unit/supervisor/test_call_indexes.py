"""``PoolExecutor.handler_call_indexes``: which messages of a job have begun their handler call, by index in the
job, also once the job's batch was cut in two (a long call's tail) or re-run one message per batch (after a
worker's death). A concurrent POP job may hold messages of several queues, so equal offsets of two queues
(issue #32): by offset (``handler_calls``) they cannot be told apart, by index they can."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from rmqrun.consumer.executor import ConsumeJob
from rmqrun.model import MessageQueue, Status
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.remoting.message import encode_stored
from rmqrun.supervisor.dispatch import Dispatcher
from rmqrun.supervisor.executor import PoolExecutor
from rmqrun.supervisor.pool_config import PoolConfig
from tests.waiting import eventually_async


class _Pool:
    """Stands in for the worker pool: records each batch sent; ``calls`` says which call each batch is in."""

    worker_ids = [0, 1]

    def __init__(self) -> None:
        self.sent: list[Any] = []
        #: batch id -> (messages done, index of the message in its call)
        self.calls: dict[int, tuple[int, int]] = {}

    def submit(self, worker: int, batch: Any) -> None:
        self.sent.append(batch)

    def live_call(self, batch_id: int) -> SimpleNamespace | None:
        if batch_id not in self.calls:
            return None
        done, at = self.calls[batch_id]
        return SimpleNamespace(done=done, in_call=True, call_start=at, call_end=at + 1, call_began=float(batch_id))

    def skip(self, batch_id: int) -> None:
        pass


def _records() -> list[bytes]:
    """Queue 1 offsets 5, 6 and queue 2 offsets 5, 6, in that order."""
    return [bytes(encode_stored(topic="T", body=b"x", properties={}, queue_id=q, queue_offset=o))
            for q, o in ((1, 5), (2, 5), (1, 6), (2, 6))]


def test_a_split_and_an_isolated_rerun_name_each_begun_call_by_its_index_in_the_job() -> None:
    async def scenario() -> None:
        ex = PoolExecutor(PoolConfig(WorkerConfig("m:f", batch_size=1, time_limit=900.0), workers=2))
        pool = _Pool()
        ex.pool = pool  # type: ignore[assignment]
        ex.dispatcher = Dispatcher(pool.worker_ids, max_inflight_messages=ex.max_inflight_messages)
        view = SimpleNamespace(dropped=False)
        job = ConsumeJob(MessageQueue("T", "b", -1), False, _records(), [5, 5, 6, 6], pq=view)
        run = asyncio.ensure_future(ex.run(job))
        await eventually_async(lambda: pool.sent, what="the job's batch")
        whole = pool.sent[0].batch_id
        pool.calls[whole] = (1, 1)  # message 0 done, message 1 (queue 2 @ 5) in its call
        assert ex.handler_call_indexes(view) == {0: None, 1: float(whole)}
        assert ex.handler_calls(view) == {5: float(whole)}, "by offset the two queues' 5 are one key"
        assert ex.handler_call_indexes(object()) == {}, "another job's view"
        # the long call's tail (messages 2, 3) cut off and sent as a batch of its own, which begins message 3
        assert ex.split(whole, 2) == 2
        tail = pool.sent[-1].batch_id
        pool.calls[tail] = (1, 1)
        assert ex.handler_call_indexes(view) == {0: None, 1: float(whole), 2: None, 3: float(tail)}
        # the head's worker dies: its unfinished message 1 is re-run alone (message 0 keeps its result)
        pending = ex._flying.pop(whole)
        ex.dispatcher.done(whole, ran=False)
        pool.calls.pop(whole)
        isolated = asyncio.ensure_future(ex._run_isolated(pending, [Status.SUCCESS], [0]))
        await eventually_async(lambda: len(pool.sent) == 3, what="the re-run of message 1")
        rerun = pool.sent[-1].batch_id
        pool.calls[rerun] = (0, 0)
        assert ex.handler_call_indexes(view) == {1: float(rerun), 2: None, 3: float(tail)}
        assert ex.handler_calls(view) == {5: float(rerun), 6: float(tail)}
        for batch_id in (rerun, tail):
            ex._on_result(SimpleNamespace(batch_id=batch_id, statuses=bytes(1 if batch_id == rerun else 2),
                                          delay_levels=(), suspend_ms=-1, error=None, elapsed=0.0, errors=(),
                                          timed_out=False))  # type: ignore[arg-type]
        await isolated
        result = await run
        assert result.verdicts == [Status.SUCCESS] * 4

    asyncio.run(scenario())
