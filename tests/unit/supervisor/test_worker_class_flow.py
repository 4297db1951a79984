"""Flow control with the threads and asyncio worker classes (issue #36): the supervisor counts calls, not batches."""

from __future__ import annotations


def test_the_dispatcher_gives_a_worker_room_for_its_calls_at_once() -> None:
    """Flow control counts calls: a worker of N calls at once holds N calls' messages running and as many waiting,
    whatever smaller bound max_inflight_messages says; the process class keeps the bound as given."""
    from rmqrun.pipe.worker_config import WorkerConfig
    from rmqrun.supervisor.executor import PoolExecutor
    from rmqrun.supervisor.pool_config import PoolConfig

    def pool(batch_size: int = 1, **worker: object) -> PoolConfig:
        return PoolConfig(WorkerConfig("m:f", batch_size=batch_size, time_limit=900.0, **worker), workers=1)

    assert PoolExecutor(pool()).max_inflight_messages == 64
    # one message in flight is a valid bound for the process class (a job waits in the executor behind it)
    assert PoolExecutor(pool(), max_inflight_messages=1).max_inflight_messages == 1
    wide = pool(worker_class="threads", concurrency=64)
    assert PoolExecutor(wide).max_inflight_messages == 128
    batched = pool(4, worker_class="asyncio", concurrency=32)
    assert PoolExecutor(batched, max_inflight_messages=10).max_inflight_messages == 256
    assert PoolExecutor(pool(worker_class="threads", concurrency=8),
                        max_inflight_messages=500).max_inflight_messages == 500
