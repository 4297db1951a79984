"""The store's disk-full mark: writes refused above the warning ratio, accepted again at or
under the forcible ratio (RocketMQ's running-flags rule), and the disk reading itself.

The disk-use reading is injected with ``set_disk_usage``; each ``clean_expired_files`` is
one retention check, the moment the mark is set or cleared.
"""

from __future__ import annotations

import os

import pytest

from rmqrun.broker.store import DiskFullError, MessageStore, StoreError
from rmqrun.broker.store.retention import disk_used_ratio
from tests.unit.store_records import build_record, small_config


@pytest.fixture
def store(tmp_path):
    s = MessageStore(tmp_path, small_config(consume_queue_entries_per_file=8)).open()
    s.set_disk_usage(lambda _p: 0.10)
    yield s
    s.close()


def put(store: MessageStore, body: bytes = b"x" * 100):
    return store.put("T", 0, build_record("T", 0, body), 0)


def reading(store: MessageStore, used: float) -> None:
    """The disk reads ``used`` from now on; one retention check sees it."""
    store.set_disk_usage(lambda _p: used)
    store.clean_expired_files()


def test_above_the_warning_ratio_writes_are_refused_and_nothing_is_stored(store) -> None:
    put(store)
    reading(store, 0.93)
    assert store.disk_full
    with pytest.raises(DiskFullError) as info:
        put(store)
    err = info.value
    assert err.limit == 90 and err.used == pytest.approx(0.93)
    assert str(store.data_dir) in str(err) and "93%" in str(err)
    assert store.max_offset("T", 0) == 1  # the refused record left no trace
    # Reads go on while writes are refused.
    got = store.get("T", 0, 0, 32)
    assert got.message_count == 1


def test_the_mark_holds_until_use_is_back_at_or_under_the_forcible_ratio(store) -> None:
    reading(store, 0.91)
    assert store.disk_full
    reading(store, 0.88)  # under 90 but above 85: still full (no flapping at the limit)
    assert store.disk_full
    with pytest.raises(DiskFullError):
        put(store)
    reading(store, 0.85)  # at the forcible ratio: cleared
    assert not store.disk_full
    assert put(store).queue_offset == 0


def test_between_the_ratios_a_disk_that_was_fine_stays_writable(store) -> None:
    reading(store, 0.88)  # forcible cleaning, but no refusal
    assert not store.disk_full
    assert put(store).queue_offset == 0
    reading(store, 0.90)  # the limit itself is not above it
    assert not store.disk_full


def test_the_warning_ratio_is_a_setting(tmp_path) -> None:
    s = MessageStore(tmp_path, small_config(disk_space_warning_level_ratio=50,
                                            disk_space_clean_forcibly_ratio=40)).open()
    try:
        reading(s, 0.51)
        with pytest.raises(DiskFullError) as info:
            put(s)
        assert info.value.limit == 50
        reading(s, 0.45)
        assert s.disk_full
        reading(s, 0.40)
        assert not s.disk_full
    finally:
        s.close()


def test_a_full_disk_at_open_refuses_writes_from_the_start(tmp_path) -> None:
    s = MessageStore(tmp_path, small_config())
    s.set_disk_usage(lambda _p: 0.97)
    s.open()
    try:
        with pytest.raises(DiskFullError):
            put(s)
    finally:
        s.close()


@pytest.mark.parametrize("value", [9, 96])
def test_a_warning_ratio_out_of_range_is_refused_by_name(value) -> None:
    with pytest.raises(StoreError, match=f"disk_space_warning_level_ratio .*got {value}"):
        small_config(disk_space_warning_level_ratio=value)


class _Statvfs:
    def __init__(self, blocks: int, bfree: int, bavail: int) -> None:
        self.f_blocks, self.f_bfree, self.f_bavail = blocks, bfree, bavail


@pytest.mark.parametrize("blocks,bfree,bavail", [
    (1000, 720, 670),    # 50 blocks reserved for root
    (1000, 100, 0),      # only root may write: reads 100%
    (3, 2, 2),           # 1/3 -> rounded up to 34%
    (1000, 1000, 1000),  # empty
])
def test_disk_reading_is_used_over_used_plus_available_rounded_up(monkeypatch, tmp_path, blocks, bfree,
                                                                  bavail) -> None:
    monkeypatch.setattr(os, "statvfs", lambda _p: _Statvfs(blocks, bfree, bavail))
    used = blocks - bfree
    percent = used * 100 // (used + bavail) + (1 if used * 100 % (used + bavail) else 0)
    assert disk_used_ratio(tmp_path) == percent / 100
