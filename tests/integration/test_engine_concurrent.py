"""Concurrent consumption end to end: embedded broker, real TCP, real worker processes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.engine_kit import (
    Running, broker, by_queue, committed_offsets, consumer_config, pool_config, produce, read_records, wait_for,
)


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
            async with Running(consumer_config(eb.namesrv_address, "G2", "T2", tags="TagA || TagC"),
                               pool_config("workers.orderly_record:handle")) as r:
                await wait_for(lambda: len(read_records(record_file)) >= 40, what="40 messages")
                await asyncio.sleep(1.0)
                assert await r.stop() == 0
            assert len(read_records(record_file)) == 40
    run(main())


def test_slow_message_holds_the_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages finishing out of order never commit past an unfinished one."""
    marker = tmp_path / "release"
    monkeypatch.setenv("RMQRUN_HANDLER_GATE_FILE", str(marker))
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD_FILE", str(tmp_path / "records.txt"))

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "T3", 20, props={})
            cfg = consumer_config(eb.namesrv_address, "G3", "T3", pull_batch_size=1)
            async with Running(cfg, pool_config("tests.integration.gate_handler:handle", workers=2)) as r:
                # offset 5 waits for the gate; later ones complete around it (one batch may
                # wait behind it on the same worker, so not necessarily all of them)
                await wait_for(lambda: len(read_records(tmp_path / "records.txt")) >= 15, what="15 messages")
                assert (0, 5) not in read_records(tmp_path / "records.txt")
                await asyncio.sleep(1.5)  # several persist rounds
                held = await committed_offsets(eb, "G3", "T3")
                assert held[0] == 5, f"commit must stay at the unfinished offset 5, got {held}"
                marker.write_text("go")
                await wait_for(lambda: len(read_records(tmp_path / "records.txt")) >= 20, what="offset 5")
                await asyncio.sleep(1.5)
                assert (await committed_offsets(eb, "G3", "T3"))[0] == 20
                assert await r.stop() == 0
    run(main())
