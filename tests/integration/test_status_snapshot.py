"""The status line's figures (``Supervisor.status``) are the full snapshot's, read without its cost.

``status_of`` reads the consumed and failed counts, each queue's lag, the batches in flight, the workers and
those not responding straight from the live objects, so that a status line every 0.1 s does not sort the
queues, copy histograms and walk every batch for its call age. It must say what ``snapshot_of`` says: here
both are read in the same loop turn, mid-drain, with a lag on the queues, and compared figure by figure.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.engine_kit import Running, broker, consumer_config, pool_config, produce, wait_for

N = 120


def test_the_status_figures_are_the_snapshots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RMQRUN_HANDLER_SLEEP_MS", "20")

    async def main() -> None:
        async with broker(tmp_path) as eb:
            await produce(eb.namesrv_address, "StT", N)
            async with Running(consumer_config(eb.namesrv_address, "StG", "StT", pull_batch_size=4),
                               pool_config("workers.misbehave:sleep", workers=1)) as r:
                sup = r.supervisor
                engine = sup.engine
                assert engine is not None

                def figures() -> tuple[object, object]:
                    return sup.status(), sup.snapshot()

                def known(lags: tuple[int | None, ...]) -> list[int]:
                    return [lag for lag in lags if lag is not None]

                def lagging() -> bool:  # the topic's 4 queues' lags known (and its retry queue's not), a backlog left
                    lags = sup.status().lags
                    return engine.stats.consumed >= 10 and len(known(lags)) == 4 and sum(known(lags)) > 0

                await wait_for(lagging, 60, what="a known lag while draining")
                status, snap = figures()  # one loop turn: the same state
                consume = snap.consume  # type: ignore[attr-defined]
                assert consume is not None
                assert (status.consumed, status.failed) == (consume.consumed, consume.failed)  # type: ignore[attr-defined]
                lags = [q.lag for q in consume.queues]
                assert len(status.lags) == len(lags) == 5, "the topic's queues and the group's retry queue"  # type: ignore[attr-defined]
                assert sorted(known(status.lags)) == sorted(known(tuple(lags)))  # type: ignore[attr-defined]
                assert status.lags.count(None) == lags.count(None)  # type: ignore[attr-defined]
                assert status.inflight_batches == snap.inflight_batches  # type: ignore[attr-defined]
                assert (status.workers, status.not_responding) == (snap.workers, snap.health.not_responding)  # type: ignore[attr-defined]
                assert status.pop is None and consume.pop is None
                assert f", lag {sum(known(status.lags))}, " in sup.status_text()  # type: ignore[attr-defined]
                await wait_for(lambda: engine.stats.consumed >= N, 60, what=f"{N} messages consumed")
                await wait_for(lambda: sum(known(sup.status().lags)) == 0, 30, what="no lag once drained")  # type: ignore[arg-type]
                assert await r.stop() == 0

    asyncio.run(asyncio.wait_for(main(), 180))
