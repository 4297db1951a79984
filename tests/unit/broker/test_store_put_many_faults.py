"""Batch appends (``put_many``) at their edges: bad arguments, a failed write, SYNC durability.

A batch is one write of several records to one queue. Arguments that do not
match are refused before anything is written; a write the file system refuses
(an I/O error; a full disk is rolled back instead) fences the store (no later write may land after a hole), exactly as for one
record; in SYNC mode ``put_many_sync`` returns only once the whole batch is on
disk. Also: a store whose commit log has a file after a gap refuses to open.
"""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

import pytest

from rmqrun.broker.store import MessageStore, RecordFormatError, StoreError, StoreIOError
from tests.unit.fake_disk import FakeDisk
from tests.unit.store_records import build_record, small_config


def test_mismatched_or_empty_batches_write_nothing(tmp_path: Path) -> None:
    with MessageStore(tmp_path, small_config()) as store:
        with pytest.raises(ValueError, match="2 records but 1 tags codes"):
            store.put_many("T", 0, [build_record("T", 0, b"a"), build_record("T", 0, b"b")], [0])
        assert store.put_many("T", 0, [], []) == []
        with pytest.raises(RecordFormatError, match="queue id -1 is negative"):
            store.put_many("T", -1, [build_record("T", 0, b"a")], [0])
        assert store.max_offset("T", 0) == 0


def test_a_failed_batch_write_fences_the_store(tmp_path: Path) -> None:
    """An I/O error (not a full disk: that one is rolled back, see test_store_no_space.py)."""
    disk = FakeDisk(tmp_path, 1 << 30)
    store = MessageStore(tmp_path, small_config(), disk=disk).open()
    store.put("T", 0, build_record("T", 0, b"before"), 0)

    disk.fail_errno = errno.EIO
    with pytest.raises(StoreIOError, match="store write failed: .*Input/output error"):
        store.put_many("T", 0, [build_record("T", 0, b"x"), build_record("T", 0, b"y")], [0, 0])
    disk.fail_errno = None
    with pytest.raises(StoreIOError, match="fenced"):
        store.put("T", 0, build_record("T", 0, b"after"), 0)
    assert store.clean_expired_files() is None, "a fenced store deletes nothing"
    store.close()
    with MessageStore(tmp_path, small_config()) as again:
        assert again.max_offset("T", 0) == 1, "recovery keeps what was written before the failure"


def test_put_many_sync_returns_once_the_batch_is_on_disk(tmp_path: Path) -> None:
    async def main() -> None:
        with MessageStore(tmp_path, small_config(flush_mode="sync")) as store:
            results = await store.put_many_sync("T", 0, [build_record("T", 0, b"%d" % i) for i in range(5)], [0] * 5)
            assert [r.queue_offset for r in results] == list(range(5))
            assert store.flushed_offset >= results[-1].end_offset
    asyncio.run(main())


def test_a_commit_log_with_a_file_after_a_gap_does_not_open(tmp_path: Path) -> None:
    with MessageStore(tmp_path, small_config()) as store:
        store.put("T", 0, build_record("T", 0, b"x"), 0)
    (tmp_path / "commitlog" / f"{3 * 4096:020d}").write_bytes(b"\0" * 100)
    with pytest.raises(StoreError, match=r"commit log files \['00000000000000012288'\] are misaligned or after a "
                                         r"gap; is segment_size=4096 right\?"):
        MessageStore(tmp_path, small_config()).open()
