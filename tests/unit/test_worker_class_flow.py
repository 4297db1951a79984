"""Flow control with the threads and asyncio worker classes (issue #36): the supervisor counts calls, not batches."""

from __future__ import annotations


def test_the_dispatcher_gives_a_worker_room_for_its_calls_at_once() -> None:
    """Flow control counts calls: a worker of N calls at once holds N calls' messages running and as many waiting,
    whatever smaller bound max_inflight_messages says; the process class keeps the bound as given."""
    from rmqrun.supervisor.executor import PoolExecutor
    from rmqrun.supervisor.pool_config import PoolConfig

    assert PoolExecutor(PoolConfig(handler="m:f", workers=1)).max_inflight_messages == 64
    wide = PoolConfig(handler="m:f", workers=1, worker_class="threads", worker_concurrency=64)
    assert PoolExecutor(wide).max_inflight_messages == 128
    batched = PoolConfig(handler="m:f", workers=1, worker_class="asyncio", worker_concurrency=32, batch_size=4)
    assert PoolExecutor(batched, max_inflight_messages=10).max_inflight_messages == 256
    assert PoolExecutor(PoolConfig(handler="m:f", workers=1, worker_class="threads", worker_concurrency=8),
                        max_inflight_messages=500).max_inflight_messages == 500
