"""Messages a worker did not run (the call before them hit its time limit) stay cached and run later.

One queue, one batch: the first message's call hangs until the soft time limit
stops it; the worker reports it failed and the rest of the batch NOT_RUN. The
failed one goes back to the broker; the others must stay in the process queue,
holding the commit, and be consumed again, never counted as done.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.engine_kit import FAST_DELAYS, Running, broker, consumer_config, pool_config, produce, wait_for
from tests.integration.signals_kit import oks, read_deliveries


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 120))


def test_not_run_messages_stay_cached_hold_the_commit_and_run_later(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "deliveries.txt"
    monkeypatch.setenv("PROBE_RECORD", str(record))
    monkeypatch.setenv("PROBE_HANG_IDX", "0")

    async def main() -> None:
        async with broker(tmp_path, message_delay_levels=FAST_DELAYS, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "NR", 6)  # offsets 0..5, pulled as one batch
            cfg = consumer_config(eb.namesrv_address, "GNR", "NR")
            async with Running(cfg, pool_config("tests.integration.handlers.probe_handler:hang", workers=1,
                                                time_limit=1.0)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                (req,) = [q for m, q in engine.table.items() if m.topic == "NR"]
                store = eb.broker.store
                # offset 0 timed out and was sent back (level 3 delay queue, or already in %RETRY%)
                await wait_for(lambda: store.max_offset("SCHEDULE_TOPIC_XXXX", 2) + store.max_offset("%RETRY%GNR", 0)
                               >= 1 and 0 not in req.pq, what="offset 0 sent back after its time limit")
                assert [d.idx for d in oks(record)] == [], "nothing after the hung call ran in that batch"
                assert all(o in req.pq for o in range(1, 6)), f"NOT_RUN messages left the cache: {req.pq}"
                assert engine.offset_store.read_memory(req.mq) <= 1, "the commit passed messages that never ran"
                await wait_for(lambda: {d.idx for d in oks(record)} >= set(range(6)), what="every message")
                await wait_for(lambda: engine.offset_store.read_memory(req.mq) == 6, what="the commit at 6")
                assert await r.stop() == 0
            got = [(d.event, d.idx, d.reconsume) for d in read_deliveries(record)]
            assert sorted(got) == sorted([("start", 0, 0), ("ok", 0, 1)] + [("ok", i, 0) for i in range(1, 6)]), got
    run(main())
