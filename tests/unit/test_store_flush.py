"""Durability: group commit in SYNC mode, periodic flush in ASYNC mode, fencing on fsync errors."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from rmqrun.broker.store import FlushMode, MessageStore, StoreIOError
from rmqrun.broker.store import segmented_file
from tests.unit.store_records import build_record, small_config


def sync_config(**kw):
    return small_config(segment_size=1 << 20, flush_mode=FlushMode.SYNC, flush_interval_ms=10_000, **kw)


def test_put_sync_returns_after_fsync_and_group_commits(tmp_path, monkeypatch) -> None:
    calls = []
    real = os.fdatasync

    def slow_fdatasync(fd):
        calls.append(fd)
        time.sleep(0.05)
        real(fd)

    monkeypatch.setattr(segmented_file.os, "fdatasync", slow_fdatasync)

    async def main(store):
        async def one(i):
            r = await store.put_sync("T", i % 4, build_record("T", i % 4, b"m%d" % i), 0)
            assert store.flushed_offset >= r.end_offset
            return r

        return await asyncio.gather(*(one(i) for i in range(200)))

    with MessageStore(tmp_path, sync_config()) as store:
        calls.clear()
        fsyncs_before = store._flusher.fsync_count
        results = asyncio.run(main(store))
        rounds = store._flusher.fsync_count - fsyncs_before
        assert len(results) == 200
        # 200 acknowledged writes, a handful of fsync rounds: group commit.
        assert 1 <= rounds <= 5, rounds


def test_event_loop_keeps_running_during_fsync(tmp_path, monkeypatch) -> None:
    real = os.fdatasync
    monkeypatch.setattr(segmented_file.os, "fdatasync", lambda fd: (time.sleep(0.3), real(fd)))

    async def main(store):
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        t0 = time.monotonic()
        await store.put_sync("T", 0, build_record("T", 0, b"x"), 0)
        elapsed = time.monotonic() - t0
        task.cancel()
        return ticks, elapsed

    with MessageStore(tmp_path, sync_config()) as store:
        ticks, elapsed = asyncio.run(main(store))
    assert elapsed >= 0.25  # it really waited for the (slow) fsync ...
    assert ticks >= 10  # ... without blocking the loop


def test_async_mode_does_not_wait_but_flushes_in_background(tmp_path, monkeypatch) -> None:
    real = os.fdatasync
    monkeypatch.setattr(segmented_file.os, "fdatasync", lambda fd: (time.sleep(0.2), real(fd)))
    cfg = small_config(flush_mode=FlushMode.ASYNC, flush_interval_ms=50)
    with MessageStore(tmp_path, cfg) as store:
        t0 = time.monotonic()
        r = asyncio.run(store.put_sync("T", 0, build_record("T", 0, b"x"), 0))
        assert time.monotonic() - t0 < 0.1
        deadline = time.monotonic() + 3
        while store.flushed_offset < r.end_offset and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.flushed_offset >= r.end_offset


def test_flush_to_waits_in_any_mode(tmp_path) -> None:
    with MessageStore(tmp_path, small_config(flush_mode=FlushMode.ASYNC, flush_interval_ms=60_000)) as store:
        r = store.put("T", 0, build_record("T", 0, b"x"), 0)
        assert store.flushed_offset < r.end_offset
        asyncio.run(store.flush_to(r.end_offset))
        assert store.flushed_offset >= r.end_offset
        r2 = store.put("T", 0, build_record("T", 0, b"y"), 0)
        store.flush(timeout=5)
        assert store.flushed_offset >= r2.end_offset


def test_fsync_failure_fences_the_store(tmp_path, monkeypatch) -> None:
    store = MessageStore(tmp_path, sync_config()).open()
    asyncio.run(store.put_sync("T", 0, build_record("T", 0, b"ok"), 0))

    def broken(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(segmented_file.os, "fdatasync", broken)
    with pytest.raises(StoreIOError):
        asyncio.run(store.put_sync("T", 0, build_record("T", 0, b"lost?"), 0))
    with pytest.raises(StoreIOError, match="fenced"):
        store.put("T", 0, build_record("T", 0, b"refused"), 0)
    monkeypatch.undo()
    store.close()
    with MessageStore(tmp_path, sync_config()) as again:
        # The acknowledged message is there; the unacknowledged one may or may not be.
        assert again.max_offset("T", 0) in (1, 2)
        assert again.put("T", 0, build_record("T", 0, b"new"), 0).queue_offset == again.max_offset("T", 0) - 1


def test_close_flushes_everything(tmp_path) -> None:
    store = MessageStore(tmp_path, small_config(flush_interval_ms=60_000, checkpoint_interval_ms=60_000)).open()
    for i in range(50):
        store.put("T", 0, build_record("T", 0, b"%d" % i), 0)
    store.close()
    assert store.flushed_offset == store.commit_log_max_offset
    with MessageStore(tmp_path, small_config()) as s:
        assert s.recovery.checkpoint_used and s.recovery.scanned_from == s.commit_log_max_offset
        assert s.max_offset("T", 0) == 50
