"""Memory limit per handler call, and a graceful stop that keeps to graceful_timeout and tells the truth."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from loguru import logger

from rmqrun.pipe.wire import Status as S
from tests.integration.engine_kit import Running, broker, consumer_config, pool_config, produce, wait_for
from tests.integration.signals_kit import read_deliveries
from tests.integration.test_pool_basic import Harness, records, run, statuses


def test_rss_limit_holds_within_one_handler_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rss_file = tmp_path / "rss.txt"
    monkeypatch.setenv("PROBE_RSS", str(rss_file))
    monkeypatch.setenv("PROBE_LEAK_MB", "64")
    limit, per_call = 300 << 20, 64 << 20

    async def scenario() -> None:
        async with Harness("tests.integration.handlers.crash_handler:leak_rss", max_memory=limit) as h:
            (first,) = h.pids(0)
            batch = h.submit(0, records(20))  # one batch: the limit must hold inside it, not only between batches
            result = await h.result(batch, timeout=60)
            got = statuses(result)
            ran = got.index(S.NOT_RUN)
            assert got == [S.SUCCESS] * ran + [S.NOT_RUN] * (20 - ran)
            assert 1 <= ran < 20
            rss = [int(line.split()[2]) for line in rss_file.read_text().splitlines()]
            assert len(rss) == ran
            assert rss[-1] > limit and all(x <= limit for x in rss[:-1])  # stopped after the call that went over
            assert max(rss) <= limit + per_call + (8 << 20), [x >> 20 for x in rss]
            # the rest goes to the replacement, which started with a fresh RSS
            await h.wait_for(lambda: h.pids(0) != [first], what="replacement")
            rest = h.submit(0, records(2, start=ran))
            assert statuses(await h.result(rest, timeout=30)) == [S.SUCCESS, S.SUCCESS]
            assert h.results[rest.batch_id].pid != first
            await h.wait_for(lambda: first not in h.pids(), what="old worker exit")
            assert not h.lost and not h.fatal
    run(scenario())


def test_graceful_stop_keeps_to_graceful_timeout_and_counts_the_jobs_it_cut_short(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "deliveries.txt"
    monkeypatch.setenv("PROBE_RECORD", str(record))
    monkeypatch.setenv("PROBE_HANG_IDX", "*")
    grace = 2.0
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="INFO")

    async def main() -> None:
        async with broker(tmp_path) as eb:
            await produce(eb.namesrv_address, "TGS", 8)
            cfg = consumer_config(eb.namesrv_address, "GGS", "TGS")
            async with Running(cfg, pool_config("tests.integration.handlers.probe_handler:hang", workers=2),
                               grace=grace) as r:
                await wait_for(lambda: len([d for d in read_deliveries(record) if d.event == "start"]) >= 2,
                               timeout=30, what="both workers hung")
                # The calls hang for an hour: a stop that ends within r.stop's 60 s kept to the graceful timeout
                # (how soon after it is the scheduler's business); one that ends before the grace did not wait.
                t0 = time.monotonic()
                code = await r.stop(timeout=60)
                assert code == 0
                assert time.monotonic() - t0 >= grace, "the stop did not wait for the graceful timeout"
                cut = r.supervisor.executor.pool.cut_short
                assert len(cut) == 2, cut
        text = "".join(lines)
        assert "pool stopped; 2 batch(es) cut short" in text
        assert "unfinished batch(es) returned" not in text
    try:
        asyncio.run(asyncio.wait_for(main(), 90))
    finally:
        logger.remove(sink)
