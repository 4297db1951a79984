"""The key index behind QUERY_MESSAGE: KEYS and UNIQ_KEY per topic, time range, incremental catch-up,
and rebuilt from the commit log when the store is reopened (segments crossed on the way)."""

from __future__ import annotations

from pathlib import Path

from rmqrun.broker.store import MessageStore
from rmqrun.broker.store.key_index import KeyIndex
from tests.unit.store_records import build_record, small_config


def put(store: MessageStore, topic: str, i: int, keys: str, uniq: str | None = None, ts: int = 1_700_000_000_001) -> int:
    props = {"KEYS": keys, **({"UNIQ_KEY": uniq} if uniq else {})}
    return store.put(topic, 0, build_record(topic, 0, f"b{i}".encode(), properties=props, store_ts=ts), 0).commit_log_offset


def offsets(index: KeyIndex, topic: str, key: str, **kw: int) -> list[int]:
    return [h.commit_log_offset for h in index.query(topic, key, 64, **kw)]


def test_keys_and_unique_keys_are_found_per_topic_and_time_range(tmp_path: Path) -> None:
    with MessageStore(tmp_path / "d", small_config()) as store:
        index = KeyIndex(store)
        a = put(store, "T", 0, "k0 shared", "U0", ts=1000)
        b = put(store, "T", 1, "k1 shared", "U1", ts=2000)
        other = put(store, "O", 2, "shared", "U2", ts=3000)
        assert offsets(index, "T", "shared") == [a, b]
        assert offsets(index, "T", "k1") == [b]
        assert offsets(index, "T", "U0") == [a]
        assert offsets(index, "O", "shared") == [other]
        assert offsets(index, "T", "U2") == []  # another topic's message
        assert offsets(index, "T", "shared", begin_ms=1500) == [b]
        assert offsets(index, "T", "shared", end_ms=1500) == [a]
        assert [h.commit_log_offset for h in index.query("T", "shared", 1)] == [b]  # the newest when limited
        assert index.last_update_offset == other
        c = put(store, "T", 3, "shared")  # written after a query: caught up by the next one
        assert offsets(index, "T", "shared") == [a, b, c]
        assert index.catch_up() == 0


def test_the_index_is_rebuilt_from_the_log_after_reopening(tmp_path: Path) -> None:
    written: dict[str, int] = {}
    with MessageStore(tmp_path / "d", small_config()) as store:
        for i in range(60):  # crosses several 4 KiB segments
            written[f"U{i}"] = put(store, "T", i, f"k{i} all", f"U{i}")
    with MessageStore(tmp_path / "d", small_config()) as store:
        index = KeyIndex(store)
        assert offsets(index, "T", "all") == sorted(written.values())[-64:]
        for uniq, pos in written.items():
            assert offsets(index, "T", uniq) == [pos]
        record = store.read_at(written["U7"])
        assert record is not None and b"b7" in record


def test_records_deleted_by_retention_leave_the_index(tmp_path: Path) -> None:
    import time

    with MessageStore(tmp_path / "d", small_config()) as store:
        index = KeyIndex(store)
        written = [put(store, "T", i, f"k{i} all") for i in range(60)]  # several 4 KiB segments
        assert offsets(index, "T", "all") == written
        keys_before = len(index)
        store.set_disk_usage(lambda _p: 0.10)
        at = time.time() + 100 * 3600  # past file_reserved_hours, at a delete_when hour
        while time.localtime(at).tm_hour != 4:
            at += 3600
        report = store.clean_expired_files(now=at)
        assert report is not None and report.deleted_commit_log_files
        floor = store.commit_log_min_offset
        assert floor > written[0]
        kept = [p for p in written if p >= floor]
        assert offsets(index, "T", "all") == kept
        assert offsets(index, "T", "k0") == []
        assert len(index) < keys_before, "keys of deleted records are forgotten"
