"""How the executor re-runs what a dead threads / asyncio worker held (issue #36).

With calls in two lanes at once a death names no suspect, so each one-message batch that was in a call is
a suspect and goes back marked ``alone``: its worker then runs it with nothing beside it, and a second death
there names its message (the lane rules are in ``rmqrun/worker/lanes.py``). Without the mark the suspects
could run side by side again and again, and the killer would only be found after POISON_DEATHS rounds,
failing the innocent message beside it as well.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from rmqrun.pipe.progress import Progress
from rmqrun.pipe.wire import Batch, ConsumeMode
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.remoting.message import encode_stored
from rmqrun.supervisor import pool as pool_mod
from rmqrun.supervisor.dispatch import Dispatcher
from rmqrun.supervisor.executor import PoolExecutor, _Pending
from rmqrun.supervisor.pool_config import PoolConfig


class _RecordingPool:
    """Stands in for the worker pool: records each batch sent and whether it was to run alone then."""

    worker_ids = [0]

    def __init__(self) -> None:
        self.sent: list[tuple[int, bool]] = []

    def submit(self, worker: int, batch: Batch) -> None:
        self.sent.append((batch.batch_id, batch.alone))

    def live_call(self, batch_id: int) -> None:
        return None

    def skip(self, batch_id: int) -> None:
        pass


def _one_message(batch_id: int) -> Batch:
    record = bytes(encode_stored(topic="T", body=b"x", properties={}, queue_id=batch_id, queue_offset=batch_id))
    return Batch(batch_id, ("q", batch_id), ConsumeMode.CONCURRENT, "b", [record], True, 1)


def test_one_message_suspects_of_a_death_with_two_calls_at_once_are_rerun_alone() -> None:
    async def scenario() -> None:
        config = PoolConfig(WorkerConfig("m:f", batch_size=1, time_limit=900.0, worker_class="threads",
                                         concurrency=2), workers=1)
        ex = PoolExecutor(config)
        pool = _RecordingPool()
        ex.pool = pool  # type: ignore[assignment]
        ex.dispatcher = Dispatcher(pool.worker_ids, max_inflight_messages=ex.max_inflight_messages, lanes=2)
        loop = asyncio.get_running_loop()
        a, b = _one_message(1), _one_message(2)
        pa, pb = _Pending(a, loop.create_future()), _Pending(b, loop.create_future())
        ex._waiting.extend([pa, pb])
        ex._dispatch()
        assert pool.sent == [(1, False), (2, False)]  # first run: side by side in two lanes

        recorded = {n: Progress(n, 1, b"\x00", (0,), True, 0, 1, 5.0) for n in (1, 2)}
        proc = SimpleNamespace(slot=0, pid=42, kill_reason=None)
        lost = pool_mod._lost(proc, -9, "killed", [a, b], [a, b], recorded, [(a, recorded[1]), (b, recorded[2])])
        assert not any(lane.in_call for lane in lost.lanes.values())  # two calls at once: no one named yet
        ex._on_lost(lost)

        # neither is failed yet (the killer is not known); both go back, each to run with nothing beside it
        assert not pa.future.done() and not pb.future.done() and ex.poison_messages == 0
        assert pool.sent[2:] == [(1, True), (2, True)]
        assert ex.lost_batches == 2 and pa.deaths == pb.deaths == 1

    asyncio.run(scenario())
