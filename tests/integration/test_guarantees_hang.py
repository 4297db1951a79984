"""A hung handler call delays only its own batch, not the batches queued behind it.

The pool pipelines batches (it sends a worker the next batch before the
current one is done) so a worker never waits for the supervisor. A batch sent
to a worker whose call then hangs waits for that call's time limit, while the
other workers may be idle. The dispatcher therefore pipelines only a few
milliseconds' worth of expected work onto a busy worker, and nothing onto one
whose current batch is running far longer than batches do.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.engine_kit import (
    FAST_DELAYS, Running, broker, consumer_config, pool_config, produce, wait_for,
)
from tests.integration.signals_kit import read_deliveries


def test_batches_are_not_queued_behind_a_hung_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "deliveries.txt"
    monkeypatch.setenv("PROBE_RECORD", str(record))
    monkeypatch.setenv("PROBE_HANG_IDX", "41")
    monkeypatch.setenv("PROBE_SLEEP_MS", "4")
    total = 400

    async def main() -> None:
        async with broker(tmp_path, message_delay_levels=FAST_DELAYS) as eb:
            await produce(eb.namesrv_address, "HG", total)
            # batches of 4 messages (16 ms); a 3 s time limit
            cfg = consumer_config(eb.namesrv_address, "GHG", "HG", pull_batch_size=4, consume_timeout_minutes=0.05)
            pool = pool_config("tests.integration.probe_handler:hang", workers=2, time_limit=3.0, kill_grace=5.0)
            async with Running(cfg, pool) as r:
                await wait_for(lambda: len({d.idx for d in read_deliveries(record) if d.event == "ok"}) >= total,
                               timeout=60, what="every message")
                assert await r.stop() == 0
        deliveries = read_deliveries(record)
        k = next(i for i, d in enumerate(deliveries) if d.event == "start")
        hung = deliveries[k]
        # Everything the hung worker ran after the hang began (its own batch's other calls
        # included, at most 3 of them) had been sent to it before the hang was noticed.
        after = [d for d in deliveries[k + 1:] if d.pid == hung.pid and d.reconsume == 0]
        assert len(after) <= 3 + 12, f"{len(after)} messages waited behind the hung call"
        # the other worker did the rest meanwhile
        assert len(deliveries) - len(after) > total / 2
    asyncio.run(asyncio.wait_for(main(), 120))
