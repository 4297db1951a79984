"""Concurrent consumption end to end: embedded broker, real TCP, real worker processes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmqrun.consumer import puller
from tests.integration.engine_kit import (
    Running, broker, by_queue, committed_offsets, consumer_config, pool_config, produce, read_records, wait_for,
)
from tests.waiting import eventually_async


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 180))


@pytest.fixture
def record_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "records.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD_FILE", str(path))
    return path


def test_every_message_consumed_once_and_offsets_committed(tmp_path: Path, record_file: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path) as eb:
            await produce(eb.namesrv_address, "T1", 200)
            async with Running(consumer_config(eb.namesrv_address, "G1", "T1"),
                               pool_config("workers.orderly_record:handle")) as r:
                await wait_for(lambda: len(read_records(record_file)) >= 200, what="200 messages")
                assert await r.stop() == 0
            records = read_records(record_file)
            assert len(records) == 200 and len(set(records)) == 200
            per_queue = by_queue(records)
            offsets = await committed_offsets(eb, "G1", "T1")
            for qid, offs in per_queue.items():
                assert sorted(offs) == list(range(len(offs)))
                assert offsets[qid] == len(offs), "the final commit covers everything consumed"
    run(main())


def test_tag_filter_delivers_only_matching_tags(tmp_path: Path, record_file: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path) as eb:
            await produce(eb.namesrv_address, "T2", 60, tags=["TagA", "TagB", "TagC"])
            async with Running(consumer_config(eb.namesrv_address, "G2", "T2", tags="TagA || TagC",
                                               broker_suspend_max_time_ms=500),
                               pool_config("workers.orderly_record:handle")) as r:
                engine = r.supervisor.engine
                assert engine is not None
                mqs = [mq for mq in engine.table if mq.topic == "T2"]
                # every one of the 60 messages has passed the consumer (consumed or filtered out)
                await wait_for(lambda: sum(max(engine.offset_store.read_memory(mq), 0) for mq in mqs) == 60,
                               what="the commit covering all 60 messages")
                assert await r.stop() == 0
            assert len(read_records(record_file)) == 40
    run(main())


def _request_of(r: Running, topic: str):  # type: ignore[no-untyped-def]
    """The engine's pull request (and process queue) of the topic's only queue."""
    engine = r.supervisor.engine
    assert engine is not None
    reqs = [req for mq, req in engine.table.items() if mq.topic == topic]
    assert len(reqs) == 1, engine.table
    return reqs[0]


def test_slow_message_holds_the_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages finishing out of order never commit past an unfinished one.

    Checked while offset 5 is still in its handler, both in the consumer's own
    offset table and at the broker, once a later message is known to be finished
    and its result processed (it has left the process queue). Nothing here depends
    on how the dispatcher spreads batches over the workers: any number of batches may
    wait behind the slow call, as long as one later message finishes somewhere.
    """
    marker = tmp_path / "release"
    records = tmp_path / "records.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_GATE_FILE", str(marker))
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD_FILE", str(records))

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "T3", 20, props={})
            # short long-polls, so that pulls finding nothing new happen while offset 5 is held
            cfg = consumer_config(eb.namesrv_address, "G3", "T3", pull_batch_size=1, broker_suspend_max_time_ms=300)
            idle_pulls = [0]
            real_idle = puller._correct_offset_when_idle

            def counting_idle(engine, req) -> None:  # type: ignore[no-untyped-def]
                if req.mq.topic == "T3":
                    idle_pulls[0] += 1
                real_idle(engine, req)
            monkeypatch.setattr(puller, "_correct_offset_when_idle", counting_idle)
            async with Running(cfg, pool_config("tests.integration.handlers.gate_handler:handle", workers=2)) as r:
                req = _request_of(r, "T3")
                store = r.supervisor.engine.offset_store  # type: ignore[union-attr]
                # every message pulled, 0..4 finished, and some message after 5 finished and processed
                await wait_for(lambda: req.pq.queue_offset_max == 19 and all(o not in req.pq for o in range(5))
                               and any(o not in req.pq for o in range(6, 20)), what="a message after 5 finished")
                assert 5 in req.pq and (0, 5) not in read_records(records)
                assert store.read_memory(req.mq) == 5, "the commit passed the unfinished offset 5"
                # the broker gets the same value from the persist loop (every 500 ms), not more
                held: dict = {}

                async def broker_has(value: int) -> bool:
                    held.update(await committed_offsets(eb, "G3", "T3"))
                    return held[0] == value
                deadline = asyncio.get_running_loop().time() + 60
                while not await broker_has(5):
                    assert held[0] is None or held[0] < 5, f"commit must stay at the unfinished offset 5, got {held}"
                    assert asyncio.get_running_loop().time() < deadline, f"offset 5 never persisted: {held}"
                    await asyncio.sleep(0.1)
                # pulls that find nothing new must not move the commit past a cached message
                seen = idle_pulls[0]
                await wait_for(lambda: idle_pulls[0] >= seen + 2, what="two pulls finding nothing new")
                assert 5 in req.pq and store.read_memory(req.mq) == 5
                marker.write_text("go")
                await wait_for(lambda: len(read_records(records)) >= 20, what="offset 5")
                await wait_for(lambda: store.read_memory(req.mq) == 20, what="the commit after offset 5 finished")
                await eventually_async(lambda: broker_has(20), what="offset 20 persisted", timeout=60, interval=0.1)
                assert await r.stop() == 0
            assert sorted(read_records(records)) == [(0, i) for i in range(20)]
    run(main())
