"""Flow control end to end: a queue whose head is stuck stops being pulled at the configured bounds.

The message at offset 0 waits in its handler (``lock_handler``'s gate) while the
test watches how far the puller goes: at most the bound plus one pull batch
(a pull may be in flight when the bound is reached), however long it waits.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.engine_kit import Running, broker, consumer_config, pool_config, produce, read_records, wait_for

HANDLER = "tests.integration.handlers.lock_handler:handle"
BATCH = 5


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 120))


@pytest.fixture
def gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LOCK_RECORD", str(tmp_path / "records.txt"))
    monkeypatch.setenv("LOCK_GATE", str(tmp_path / "gate"))
    return tmp_path / "gate"


async def _held_at_bound(tmp_path: Path, gate: Path, bound: int, workers: int, **cfg: object) -> None:
    async with broker(tmp_path, auto_create_queue_nums=1) as eb:
        await produce(eb.namesrv_address, "FL", 150)
        config = consumer_config(eb.namesrv_address, "GFL", "FL", pull_batch_size=BATCH, **cfg)
        async with Running(config, pool_config(HANDLER, workers=workers)) as r:
            engine = r.supervisor.engine
            assert engine is not None
            (req,) = [q for m, q in engine.table.items() if m.topic == "FL"]
            await wait_for(lambda: Path(str(gate) + ".started").exists(), what="offset 0 in its handler")
            # the puller reaches the bound; then count its flow-control rounds (each asks for the thresholds)
            await wait_for(lambda: req.next_offset >= bound, what="the puller reaching the bound")
            rounds = [0]
            real = engine.queue_thresholds

            def counting():  # type: ignore[no-untyped-def]
                rounds[0] += 1
                return real()
            engine.queue_thresholds = counting  # type: ignore[method-assign]
            await wait_for(lambda: rounds[0] >= 20 or req.next_offset > bound + BATCH + 1,
                           what="20 more rounds of the pull loop")
            assert req.next_offset <= bound + BATCH + 1, f"pulled up to {req.next_offset} past the bound {bound}"
            gate.write_text("go")
            await wait_for(lambda: len(read_records(tmp_path / "records.txt")) >= 150, what="everything after the gate")
            assert await r.stop() == 0
        assert sorted(o for _, o in read_records(tmp_path / "records.txt")) == list(range(150))


def test_cached_message_count_bounds_the_pulls(tmp_path: Path, gate: Path) -> None:
    # one worker, stuck on offset 0: everything pulled stays cached
    run(_held_at_bound(tmp_path, gate, 20, workers=1, pull_threshold_for_queue=20))


def test_offset_span_bounds_the_pulls(tmp_path: Path, gate: Path) -> None:
    # the span is counted over cached (unfinished) messages, as in Java: with the only worker stuck
    # on offset 0 everything pulled stays cached, and the span (not the count, 1000) is the bound
    run(_held_at_bound(tmp_path, gate, 30, workers=1, consume_concurrently_max_span=30))


def test_the_topic_wide_count_is_shared_by_the_queues_held(tmp_path: Path, gate: Path) -> None:
    # pullThresholdForTopic is split over the queues this consumer holds: FL's queue and the group's
    # retry queue, so 40 for the topic is 20 for FL's queue (the per-queue default, 1000, is overridden)
    run(_held_at_bound(tmp_path, gate, 20, workers=1, pull_threshold_for_topic=40))
