"""Retention in the store: which commit-log files go when, and how consume queues follow.

Ages are set with ``os.utime`` on real segment files and the clock is passed to
``clean_expired_files(now=...)``; the disk-use reading goes through ``set_disk_usage``.
"""

from __future__ import annotations

import os
import time

import pytest

from rmqrun.broker.store import GetMessageStatus as S
from rmqrun.broker.store import MessageStore
from rmqrun.broker.store.errors import StoreError
from tests.unit.store_records import build_record, crash, decode_record, small_config

HOUR = 3600.0


def open_store(path, **overrides):
    cfg = dict(consume_queue_entries_per_file=8, file_reserved_hours=1, delete_when="04")
    cfg.update(overrides)
    return MessageStore(path, small_config(**cfg)).open()


def fill(store, n, topic="T", qid=0, size=200):
    return [store.put(topic, qid, build_record(topic, qid, bytes([65 + i % 26]) * size), 0) for i in range(n)]


def log_files(path):
    return sorted(p.name for p in (path / "commitlog").iterdir())


def queue_files(path, topic="T", qid=0):
    return sorted(p.name for p in (path / "consumequeue" / topic / str(qid)).iterdir())


def age_all(path, seconds):
    """Make every commit-log file look last written ``seconds`` before today's first hour.

    The checks pass clocks of today (:func:`at_hour`), so such files are that old or older.
    """
    set_mtime(path, at_hour(0) - seconds)


def make_fresh(path):
    """Every commit-log file last written late today: unexpired at any clock of today."""
    set_mtime(path, at_hour(23))


def set_mtime(path, t):
    for p in (path / "commitlog").iterdir():
        os.utime(p, (t, t))


def at_hour(hour: int) -> float:
    """An epoch time today at ``hour`` local time (what delete_when compares with)."""
    lt = time.localtime()
    return time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, hour, 30, 0, 0, 0, -1))


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path)
    s.set_disk_usage(lambda _p: 0.10)
    yield s
    s.close()


def test_expired_files_go_only_at_the_delete_hour(tmp_path, store) -> None:
    fill(store, 60)  # ~60 * 300 bytes in 4 KiB segments: several files
    files = log_files(tmp_path)
    assert len(files) >= 4
    age_all(tmp_path, 2 * HOUR)  # older than file_reserved_hours=1

    report = store.clean_expired_files(now=at_hour(5))
    assert report is not None and report.reason is None and report.deleted_commit_log_files == []
    assert log_files(tmp_path) == files and store.min_offset("T", 0) == 0

    report = store.clean_expired_files(now=at_hour(4))
    assert report is not None and report.reason == "time"
    # Every file but the one being written is gone; the log now starts at the last file.
    assert report.deleted_commit_log_files == files[:-1]
    assert log_files(tmp_path) == files[-1:]
    assert store.commit_log_min_offset == int(files[-1])


def test_consume_queue_follows_and_nothing_is_served_from_a_deleted_file(tmp_path, store) -> None:
    results = fill(store, 60)
    age_all(tmp_path, 2 * HOUR)
    cq_files_before = queue_files(tmp_path)
    assert len(cq_files_before) >= 7  # 8 entries per file
    store.clean_expired_files(now=at_hour(4))
    log_min = store.commit_log_min_offset
    first_kept = next(r.queue_offset for r in results if r.commit_log_offset >= log_min)
    assert first_kept > 0
    # The min offset is the first entry whose record survived (maybe inside a file).
    assert store.min_offset("T", 0) == first_kept
    assert store.max_offset("T", 0) == 60
    # Queue files whose entries all point below the log's minimum are deleted.
    kept = queue_files(tmp_path)
    assert kept and int(kept[0]) // 20 == first_kept - first_kept % 8
    assert len(kept) < len(cq_files_before)

    res = store.get("T", 0, 0, 32)
    assert (res.status, res.next_begin_offset, res.min_offset) == (S.OFFSET_TOO_SMALL, first_kept, first_kept)
    assert store.read_at(results[0].commit_log_offset) is None
    res = store.get("T", 0, first_kept, 100)
    assert res.status is S.FOUND
    assert [decode_record(r).queue_offset for r in res.records][0] == first_kept
    assert store.earliest_store_time("T", 0) != -1
    assert store.search_offset_by_timestamp("T", 0, 0) == first_kept


def test_unexpired_files_stay_below_the_forcible_ratio(tmp_path, store) -> None:
    fill(store, 60)
    files = log_files(tmp_path)
    make_fresh(tmp_path)
    # Fresh files at the delete hour: nothing is expired, nothing goes.
    assert store.clean_expired_files(now=at_hour(4)).deleted_commit_log_files == []
    # Above diskMaxUsedSpaceRatio (75): still only expired files, whatever the hour.
    store.set_disk_usage(lambda _p: 0.80)
    report = store.clean_expired_files(now=at_hour(12))
    assert report.reason == "disk" and report.deleted_commit_log_files == []
    age_all(tmp_path, 2 * HOUR)
    report = store.clean_expired_files(now=at_hour(12))
    assert report.deleted_commit_log_files == files[:-1]


def test_forced_clean_above_the_forcible_ratio_deletes_unexpired_files(tmp_path, store) -> None:
    fill(store, 60)
    files = log_files(tmp_path)
    store.set_disk_usage(lambda _p: 0.90)
    report = store.clean_expired_files(now=at_hour(12))
    assert report.reason == "forced"
    assert report.deleted_commit_log_files == files[:-1]
    assert log_files(tmp_path) == files[-1:]  # never the file being written
    assert store.min_offset("T", 0) > 0
    # Writing goes on at the end.
    r = store.put("T", 0, build_record("T", 0, b"after"), 0)
    assert r.queue_offset == 60
    assert store.get("T", 0, 60, 1).status is S.FOUND


def test_batch_max_limits_one_check(tmp_path) -> None:
    s = open_store(tmp_path, delete_files_batch_max=2)
    try:
        fill(s, 60)
        files = log_files(tmp_path)
        age_all(tmp_path, 2 * HOUR)
        s.set_disk_usage(lambda _p: 0.1)
        assert s.clean_expired_files(now=at_hour(4)).deleted_commit_log_files == files[:2]
        assert s.clean_expired_files(now=at_hour(4)).deleted_commit_log_files == files[2:4]
    finally:
        s.close()


def test_a_queue_wholly_below_the_minimum_is_empty(tmp_path, store) -> None:
    fill(store, 5, topic="Old")
    fill(store, 60)
    age_all(tmp_path, 2 * HOUR)
    store.clean_expired_files(now=at_hour(4))
    assert store.min_offset("Old", 0) == store.max_offset("Old", 0) == 5
    assert store.get("Old", 0, 5, 32).status is S.OFFSET_OVERFLOW_ONE


def test_listeners_hear_the_new_minimum(tmp_path, store) -> None:
    heard: list[int] = []
    store.add_retention_listener(heard.append)
    fill(store, 60)
    age_all(tmp_path, 2 * HOUR)
    store.clean_expired_files(now=at_hour(4))
    assert heard == [store.commit_log_min_offset]
    store.clean_expired_files(now=at_hour(4))  # nothing more to delete: no second call
    assert heard == [store.commit_log_min_offset]


@pytest.mark.parametrize("how", ["clean", "crash", "no-checkpoint"])
def test_reopen_after_retention_keeps_the_minimum(tmp_path, how) -> None:
    s = open_store(tmp_path)
    s.set_disk_usage(lambda _p: 0.1)
    results = fill(s, 60)
    age_all(tmp_path, 2 * HOUR)
    s.clean_expired_files(now=at_hour(4))
    lo, log_min = s.min_offset("T", 0), s.commit_log_min_offset
    fill(s, 3)
    if how == "clean":
        s.close()
    else:
        s.flush()
        crash(s)
        if how == "no-checkpoint":
            (tmp_path / "checkpoint.json").unlink()
    s = open_store(tmp_path)
    try:
        assert s.recovery is not None and s.recovery.truncated_bytes == 0, s.recovery
        assert (s.commit_log_min_offset, s.min_offset("T", 0), s.max_offset("T", 0)) == (log_min, lo, 63)
        res = s.get("T", 0, lo, 100)
        assert res.status is S.FOUND
        assert [decode_record(r).queue_offset for r in res.records] == list(range(lo, 63))
        assert s.read_at(results[-1].commit_log_offset) is not None
    finally:
        s.close()


def test_bad_retention_settings_are_refused() -> None:
    with pytest.raises(StoreError, match="delete_when"):
        small_config(delete_when="4am")
    with pytest.raises(StoreError, match="delete_when"):
        small_config(delete_when="25")
    with pytest.raises(StoreError, match="file_reserved_hours"):
        small_config(file_reserved_hours=0)
    with pytest.raises(StoreError, match="disk_max_used_space_ratio"):
        small_config(disk_max_used_space_ratio=99)
    assert small_config(delete_when="04;16").delete_when == "04;16"


def test_a_read_in_flight_finishes_on_a_deleted_file_which_closes_after_it(tmp_path, store) -> None:
    """A read racing with deletion holds its segment (for one pread): the descriptor is closed by
    that read's release, never under it; every other deleted file is closed at once (its space is
    free); a reader coming later through a stale segment list reads nothing, never a new file."""
    fill(store, 60)
    age_all(tmp_path, 2 * HOUR)
    log_file = store._log.file
    old_list = log_file.segments
    head = old_list[0]
    expected = log_file.read(head.start, 8)
    fd = log_file._hold(head)  # a read in flight on the head file
    store.clean_expired_files(now=at_hour(4))
    assert head.gone and not head.path.exists()
    assert head.fd == fd and os.pread(fd, 8, 0) == expected, "closed under a read in flight"
    assert all(seg.fd is None for seg in old_list[1:-1]), "a deleted file nobody reads is still open"
    log_file._release(head)
    assert head.fd is None, "the last reader did not close the deleted file"
    current = log_file.segments
    log_file.segments = old_list  # the reader's stale view
    try:
        assert log_file.read(head.start, 8) == b""
        assert log_file.read_into(head.start, 8) == bytearray()
        assert not head.path.exists()
    finally:
        log_file.segments = current


def test_open_runs_one_check_before_writing(tmp_path) -> None:
    """A store closed with a full disk frees space on open, before its first write."""
    s = open_store(tmp_path)
    fill(s, 60)
    s.close()
    files = log_files(tmp_path)
    s = MessageStore(tmp_path, small_config(consume_queue_entries_per_file=8))
    s.set_disk_usage(lambda _p: 0.99)
    s.open()
    try:
        assert log_files(tmp_path) == files[-1:]
        assert s.min_offset("T", 0) > 0 and s.max_offset("T", 0) == 60
    finally:
        s.close()
