"""Durability: group commit in SYNC mode, periodic flush in ASYNC mode, fencing on fsync errors."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from rmqrun.broker.store import FlushMode, MessageStore, StoreIOError
from rmqrun.broker.store import segmented_file
from tests.unit.store_records import build_record, small_config
from tests.waiting import eventually_async


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


class BlockingFsync:
    """An fdatasync that, once armed, blocks its first call until the test releases it.

    The thread that called it waits at most ``limit`` seconds, so a blocked event
    loop (which could never release it) shows up as ``released_in_time`` False
    instead of a hung test.
    """

    def __init__(self, limit: float = 20.0) -> None:
        self.real = os.fdatasync
        self.armed = False
        self.entered = threading.Event()
        self.release = threading.Event()
        self.released_in_time: bool | None = None
        self.limit = limit

    def __call__(self, fd: int) -> None:
        if self.armed and not self.entered.is_set():
            self.entered.set()
            self.released_in_time = self.release.wait(self.limit)
        self.real(fd)


def test_event_loop_keeps_running_during_fsync(tmp_path, monkeypatch) -> None:
    fsync = BlockingFsync()
    monkeypatch.setattr(segmented_file.os, "fdatasync", fsync)

    async def main(store):
        fsync.armed = True
        put = asyncio.create_task(store.put_sync("T", 0, build_record("T", 0, b"x"), 0))
        # the loop goes on polling while the fsync is blocked in the flusher ...
        await eventually_async(fsync.entered.is_set, what="the fsync of the put")
        for _ in range(5):
            await asyncio.sleep(0)
        assert not put.done(), "a SYNC put was answered before its fsync finished"
        # ... and it is the loop that releases it: impossible if put_sync blocked the loop
        fsync.release.set()
        r = await asyncio.wait_for(put, 20)
        assert store.flushed_offset >= r.end_offset

    with MessageStore(tmp_path, sync_config()) as store:
        asyncio.run(main(store))
    assert fsync.released_in_time is True


def test_async_mode_does_not_wait_but_flushes_in_background(tmp_path, monkeypatch) -> None:
    fsync = BlockingFsync()
    monkeypatch.setattr(segmented_file.os, "fdatasync", fsync)
    cfg = small_config(flush_mode=FlushMode.ASYNC, flush_interval_ms=50)

    async def main(store):
        fsync.armed = True
        # no fsync can finish before the release below: returning at all proves the put did not wait
        r = await asyncio.wait_for(store.put_sync("T", 0, build_record("T", 0, b"x"), 0), 10)
        assert store.flushed_offset < r.end_offset
        await eventually_async(fsync.entered.is_set, what="the background flush")
        assert store.flushed_offset < r.end_offset
        fsync.release.set()
        await eventually_async(lambda: store.flushed_offset >= r.end_offset, what="the background flush to finish")

    with MessageStore(tmp_path, cfg) as store:
        asyncio.run(main(store))
    assert fsync.released_in_time is True


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


def test_one_fsync_round_across_a_segment_boundary_syncs_every_file_it_covers(tmp_path) -> None:
    """Records at the tail of one segment and the head of the next, made durable by one
    group-commit round: that round must fsync both files. Counting rounds cannot tell; the
    files the fsync calls reach can (a round syncing only the newest file would still move
    the flushed offset, and a SYNC send at the old segment's tail would be acknowledged
    with its bytes only in the page cache)."""
    cfg = small_config(flush_mode=FlushMode.SYNC, flush_interval_ms=60_000, checkpoint_interval_ms=60_000)
    with MessageStore(tmp_path, cfg) as store:
        asyncio.run(store.put_sync("T", 0, build_record("T", 0, b"durable"), 0))
        synced: list[str] = []

        def recording_fsync(fd: int) -> None:
            synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
            os.fdatasync(fd)

        store.set_commit_log_fsync(recording_fsync)
        rounds_before = store._flusher.fsync_count
        tail = []  # plain puts: in SYNC mode nothing fsyncs them until someone waits
        while not tail or tail[-1].commit_log_offset < cfg.segment_size:
            tail.append(store.put("T", 0, build_record("T", 0, b"x" * 200), 0))
        assert tail[-2].commit_log_offset < cfg.segment_size <= tail[-1].commit_log_offset  # the premise
        asyncio.run(store.flush_to(tail[-1].end_offset))
        assert store._flusher.fsync_count - rounds_before == 1, "one round covers both segments"
        assert sorted(set(synced)) == [f"{0:020d}", f"{cfg.segment_size:020d}"], synced
