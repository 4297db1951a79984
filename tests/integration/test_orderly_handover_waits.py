"""A queue moved to another instance is unlocked only after the job it has running ends (both orderly modes).

The handler is slow (1 s a call) and the first job of a queue holds all of its six cached
messages, so when a second instance joins and the queue moves to it, the first instance is a
few seconds into that job. It must finish the job and commit before it unlocks; unlocking at
once would let the newcomer lock the queue at its next rebalance (2 s) and start from the old
committed offset while the first instance's calls still run: two calls of one queue at once,
and the same messages twice. (The key-order drain test's 10 ms calls leave no such overlap to
see; issue #23, item 4.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.engine_kit import Running, broker, consumer_config, pool_config, produce, wait_for
from tests.integration.test_orderly_lock_gap import read_calls

HANDLER = "tests.integration.handlers.gap_handler:handle"


#: one key per queue (the producer hashes a key to a queue as Java does), each key on its own worker of
#: two (crc32 of the key): "0" goes to queue 0 and worker 1, "5" to queue 1 and worker 0. Keys that shared a
#: worker (as "0" and "1" do) would run the two queues' jobs one after the other on it, and the moved queue's
#: job, still waiting behind the other's, would never start in the first instance: nothing to overlap.
KEYS = ("0", "5")


@pytest.mark.parametrize("order_by", ["queue", "key"])
def test_a_moved_queue_is_unlocked_only_after_its_running_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              order_by: str) -> None:
    record = tmp_path / "calls.txt"
    monkeypatch.setenv("GAP_RECORD", str(record))
    monkeypatch.setenv("GAP_SLEEP_MS", "1000")

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=2) as eb:
            await produce(eb.namesrv_address, "TH", 12, key_names=KEYS)  # 6 per queue, one key each
            cfg = lambda: consumer_config(eb.namesrv_address, "GTH", "TH", orderly=True, order_by=order_by)  # noqa: E731
            async with Running(cfg(), pool_config(HANDLER, workers=2)) as a:
                pids_a = {s.pid for s in a.supervisor.executor.pool.workers()}
                await wait_for(lambda: len(read_calls(record)) >= 2, timeout=60, what="A's first calls")
                async with Running(cfg(), pool_config(HANDLER, workers=2)) as b:
                    engine_b = b.supervisor.engine
                    assert engine_b is not None
                    await wait_for(lambda: any(mq.topic == "TH" for mq in engine_b.table), timeout=60,
                                   what="B owning a queue")
                    moved = next(mq.queue_id for mq in engine_b.table if mq.topic == "TH")
                    await produce(eb.namesrv_address, "TH", 8, key_names=KEYS, start=12)
                    await wait_for(lambda: len({(c.queue, c.offset) for c in read_calls(record)}) >= 20,
                                   timeout=120, what="all 20 messages")
                    assert await b.stop() == 0
                assert await a.stop() == 0
        calls = [c for c in read_calls(record) if c.queue == moved]
        by_a = [c for c in calls if c.pid in pids_a]
        by_b = [c for c in calls if c.pid not in pids_a]
        assert by_a and by_b, (moved, pids_a, read_calls(record))
        # A's job on the moved queue ran to its end before B started anything on it
        assert max(c.end for c in by_a) < min(c.start for c in by_b), sorted((c.start, c.pid, c.offset) for c in calls)
        # and was committed: B went on after it, nothing handled twice
        assert sorted(c.offset for c in calls) == list(range(len(calls)))
    asyncio.run(asyncio.wait_for(main(), 240))
