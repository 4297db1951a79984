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
    """The hang lasts until the test ends it, once the other worker has done everything not queued behind it.

    It used to end at a 3 s time limit, and the test counted on the other worker having drained the backlog by
    then: under load it had not, the recovered worker took more work, legitimately, and the count of what
    "waited behind the hung call" took that in (56 messages). Now whatever is not done when the hang ends was
    given to the hung worker before the hang showed; the long-call watch (which would take that work back,
    another guarantee) is off, so this tests the dispatcher's pipelining bound alone."""
    record, release = tmp_path / "deliveries.txt", tmp_path / "release"
    monkeypatch.setenv("PROBE_RECORD", str(record))
    monkeypatch.setenv("PROBE_HANG_IDX", "41")
    monkeypatch.setenv("PROBE_HANG_RELEASE", str(release))
    monkeypatch.setenv("PROBE_SLEEP_MS", "4")
    total = 400
    # its own batch's other 3 messages, and 12 pipelined (3 batches of 4 at 4 ms each fill the 50 ms budget)
    behind_at_most = 3 + 12

    def not_done() -> set[int]:
        return set(range(total)) - {d.idx for d in read_deliveries(record) if d.event == "ok"}

    async def main() -> None:
        async with broker(tmp_path, message_delay_levels=FAST_DELAYS) as eb:
            await produce(eb.namesrv_address, "HG", total)
            # batches of 4 messages (16 ms); the hung message is swept back after 3 s and run by the other worker
            cfg = consumer_config(eb.namesrv_address, "GHG", "HG", pull_batch_size=4, consume_timeout_minutes=0.05)
            pool = pool_config("tests.integration.handlers.probe_handler:hang", workers=2, long_call_seconds=0, kill_grace=5.0)
            async with Running(cfg, pool) as r:
                # if batches were queued behind the hang, they would stay undone until it ends: this wait fails
                await wait_for(lambda: len(not_done()) <= behind_at_most, timeout=90,
                               what=f"everything but at most {behind_at_most} messages done while the call hangs")
                assert any(d.event == "start" for d in read_deliveries(record)), "the call never hung"
                release.touch()
                await wait_for(lambda: not not_done(), timeout=60, what="every message")
                assert await r.stop() == 0
        deliveries = read_deliveries(record)
        k = next(i for i, d in enumerate(deliveries) if d.event == "start")
        hung = deliveries[k]
        # What the hung worker ran after the hang: what it had been given before (the hung message itself, run
        # again by the other worker after the sweep, excluded).
        after = [d for d in deliveries[k + 1:] if d.pid == hung.pid and d.reconsume == 0 and d.idx != hung.idx]
        assert len(after) <= behind_at_most, f"{len(after)} messages waited behind the hung call"
        # the other worker did the rest meanwhile
        assert len(deliveries) - len(after) > total / 2
    asyncio.run(asyncio.wait_for(main(), 120))
