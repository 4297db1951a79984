"""Appends: round trips across segment boundaries, batches, validation, read_at."""

from __future__ import annotations

import os
import struct

import pytest

from rmqrun.broker.store import (
    GetMessageStatus,
    MessageStore,
    MessageTooLargeError,
    RecordFormatError,
    StoreClosedError,
    StoreError,
    StoreLockedError,
)
from rmqrun.broker.store.record import BLANK_MAGIC
from tests.unit.store_records import build_record, decode_record, small_config


@pytest.fixture
def store(tmp_path):
    s = MessageStore(tmp_path / "data", small_config()).open()
    yield s
    s.close()


def _body(i: int) -> bytes:
    return f"message-{i:05d}-".encode() * (1 + i % 7)


def test_round_trip_across_segment_boundaries(store, tmp_path) -> None:
    results = [store.put("T", 1, build_record("T", 1, _body(i), tags="a"), 7) for i in range(300)]
    assert [r.queue_offset for r in results] == list(range(300))
    # Several segments were written, each named by its 20-digit start offset.
    names = sorted(os.listdir(tmp_path / "data" / "commitlog"))
    assert len(names) > 5 and all(len(n) == 20 and int(n) % 4096 == 0 for n in names)
    # No record straddles a segment end.
    for r in results:
        assert r.commit_log_offset // 4096 == (r.end_offset - 1) // 4096
    got = []
    offset = 0
    while True:
        res = store.get("T", 1, offset, 32, max_bytes=1 << 20)
        if res.status is not GetMessageStatus.FOUND:
            break
        got.extend(decode_record(r) for r in res.records)
        offset = res.next_begin_offset
    assert [d.body for d in got] == [_body(i) for i in range(300)]
    assert [d.queue_offset for d in got] == list(range(300))
    assert [d.physical_offset for d in got] == [r.commit_log_offset for r in results]


def test_segment_end_is_a_blank_marker_claiming_the_rest(store, tmp_path) -> None:
    for i in range(60):
        store.put("T", 0, build_record("T", 0, _body(i)), 0)
    first = (tmp_path / "data" / "commitlog" / f"{0:020d}").read_bytes()
    # Walk the records of the first segment to the marker.
    pos = 0
    while True:
        size, magic = struct.unpack_from(">iI", first, pos)
        if magic == BLANK_MAGIC:
            assert size == 4096 - pos and size >= 8
            break
        pos += size


def test_put_many_gives_consecutive_offsets_and_adjacent_records(store) -> None:
    store.put("T", 2, build_record("T", 2, b"first"), 0)
    recs = [build_record("T", 2, f"b{i}".encode()) for i in range(5)]
    results = store.put_many("T", 2, recs, [1, 2, 3, 4, 5])
    assert [r.queue_offset for r in results] == [1, 2, 3, 4, 5]
    for a, b in zip(results, results[1:]):
        assert b.commit_log_offset == a.end_offset
    # The caller's bytearrays were patched with the offsets.
    assert [decode_record(r).queue_offset for r in recs] == [1, 2, 3, 4, 5]
    assert [decode_record(r).physical_offset for r in recs] == [r.commit_log_offset for r in results]
    assert store.max_offset("T", 2) == 6


def test_put_many_rolls_segments_inside_a_batch(store) -> None:
    recs = [build_record("T", 0, b"z" * 500) for _ in range(20)]  # ~12 KiB: three segments
    results = store.put_many("T", 0, recs, [0] * 20)
    assert [r.queue_offset for r in results] == list(range(20))
    assert len({r.commit_log_offset // 4096 for r in results}) >= 3
    res = store.get("T", 0, 0, 32, max_bytes=1 << 20)
    assert [bytes(r) for r in res.records] == [bytes(r) for r in recs]


def test_queues_are_independent(store) -> None:
    for i in range(10):
        store.put("A", 0, build_record("A", 0, b"a%d" % i), 0)
        store.put("B", 3, build_record("B", 3, b"b%d" % i), 0)
    assert store.max_offset("A", 0) == 10 and store.max_offset("B", 3) == 10
    assert store.max_offset("A", 3) == 0 and store.min_offset("A", 0) == 0
    assert [decode_record(r).body for r in store.get("B", 3, 5, 3).records] == [b"b5", b"b6", b"b7"]
    assert store.queues() == [("A", 0), ("B", 3)]


def test_store_timestamp_is_stamped_and_monotonic(tmp_path) -> None:
    with MessageStore(tmp_path, small_config(stamp_store_timestamp=True)) as s:
        for i in range(20):
            s.put("T", 0, build_record("T", 0, b"x", store_ts=0), 0)
        times = [s.store_time_at("T", 0, i) for i in range(20)]
        assert times == sorted(times) and times[0] > 1_600_000_000_000


def test_too_large_record_is_rejected(store) -> None:
    rec = build_record("T", 0, b"x" * 2000)
    with pytest.raises(MessageTooLargeError, match="max_message_size=1024"):
        store.put("T", 0, rec, 0)
    assert store.max_offset("T", 0) == 0 and store.commit_log_max_offset == 0


@pytest.mark.parametrize(
    "topic,qid,record,message",
    [
        ("T", 0, build_record("T", 0, b"x", bad_crc=True), "BODYCRC"),
        ("T", 1, build_record("T", 0, b"x"), "put to T/1"),
        ("U", 0, build_record("T", 0, b"x"), "put to U/0"),
        ("a/b", 0, build_record("a/b", 0, b"x"), "directory"),
        ("T", 0, build_record("T", 0, b"x") + b"\x00", "TOTALSIZE"),
    ],
)
def test_bad_records_are_rejected_without_side_effects(store, topic, qid, record, message) -> None:
    with pytest.raises(RecordFormatError, match=message):
        store.put(topic, qid, record, 0)
    assert store.commit_log_max_offset == 0


def test_record_must_be_a_bytearray(store) -> None:
    with pytest.raises(TypeError):
        store.put("T", 0, bytes(build_record("T", 0, b"x")), 0)  # type: ignore[arg-type]


def test_read_at(store) -> None:
    rs = [store.put("T", 0, build_record("T", 0, b"body%d" % i), 0) for i in range(3)]
    assert decode_record(store.read_at(rs[1].commit_log_offset)).body == b"body1"
    assert decode_record(store.read_at(rs[2].commit_log_offset, rs[2].size)).body == b"body2"
    assert store.read_at(rs[1].commit_log_offset + 1) is None  # not a record boundary
    assert store.read_at(rs[2].end_offset) is None  # past the end
    assert store.read_at(-5) is None
    assert store.read_at(rs[0].commit_log_offset, rs[0].size + 1) is None


def test_closed_store_refuses_writes(tmp_path) -> None:
    s = MessageStore(tmp_path, small_config())
    with pytest.raises(StoreClosedError):
        s.put("T", 0, build_record("T", 0, b"x"), 0)
    s.open()
    s.close()
    with pytest.raises(StoreClosedError):
        s.put("T", 0, build_record("T", 0, b"x"), 0)


def test_directory_is_locked_while_open(tmp_path) -> None:
    with MessageStore(tmp_path, small_config()):
        with pytest.raises(StoreLockedError):
            MessageStore(tmp_path, small_config()).open()
    MessageStore(tmp_path, small_config()).open().close()  # released on close


def test_segment_size_change_is_refused(tmp_path) -> None:
    with MessageStore(tmp_path, small_config()) as s:
        s.put("T", 0, build_record("T", 0, b"x"), 0)
    with pytest.raises(StoreError, match="segment_size=4096"):
        MessageStore(tmp_path, small_config(segment_size=8192)).open()


def test_config_validation() -> None:
    with pytest.raises(StoreError, match="segment_size"):
        small_config(segment_size=1000)
    with pytest.raises(StoreError, match="flush_interval_ms"):
        small_config(flush_interval_ms=0)
    assert small_config(flush_mode="sync").flush_mode.value == "sync"


def test_arrival_listener(store) -> None:
    seen = []
    store.arrival_listeners.append(lambda t, q, m: seen.append((t, q, m)))
    store.put("T", 0, build_record("T", 0, b"x"), 0)
    store.put_many("T", 0, [build_record("T", 0, b"y"), build_record("T", 0, b"z")], [0, 0])
    assert seen == [("T", 0, 1), ("T", 0, 3)]


def test_reopen_keeps_everything(tmp_path) -> None:
    with MessageStore(tmp_path, small_config()) as s:
        for i in range(100):
            s.put(f"T{i % 3}", i % 2, build_record(f"T{i % 3}", i % 2, b"v%d" % i, tags="t"), i)
        before = {(t, q): [bytes(r) for r in s.get(t, q, 0, 100, 1 << 20).records] for t, q in s.queues()}
    with MessageStore(tmp_path, small_config()) as s:
        assert s.recovery.checkpoint_used and s.recovery.records_scanned == 0
        after = {(t, q): [bytes(r) for r in s.get(t, q, 0, 100, 1 << 20).records] for t, q in s.queues()}
        assert after == before
        # Appends continue where they stopped.
        r = s.put("T0", 0, build_record("T0", 0, b"more"), 0)
        assert r.queue_offset == len(before[("T0", 0)])


def test_concurrent_puts_from_threads(tmp_path) -> None:
    import threading

    from tests.unit.store_records import assert_consistent

    with MessageStore(tmp_path, small_config(segment_size=64 * 1024)) as s:
        def writer(k: int) -> None:
            for i in range(300):
                q = (k + i) % 2
                s.put("T", q, build_record("T", q, b"%d:%d" % (k, i)), 0)

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        bodies = assert_consistent(s)
        assert sum(len(v) for v in bodies.values()) == 1200
        for k in range(4):  # each writer's messages keep their order within a queue
            for q in range(2):
                mine = [int(b.split(b":")[1]) for b in bodies[("T", q)] if b.startswith(b"%d:" % k)]
                assert mine == sorted(mine) and len(mine) == 150


def test_put_result_reports_the_store_timestamp(tmp_path) -> None:
    with MessageStore(tmp_path / "a", small_config(stamp_store_timestamp=True)) as s:
        r = s.put("T", 0, build_record("T", 0, b"x", store_ts=5), 0)
        assert r.store_timestamp > 5 and s.store_time_at("T", 0, 0) == r.store_timestamp
    with MessageStore(tmp_path / "b", small_config(stamp_store_timestamp=False)) as s:
        assert s.put("T", 0, build_record("T", 0, b"x", store_ts=5), 0).store_timestamp == 5


def test_read_at_refuses_positions_that_hold_no_record(store) -> None:
    """Positions come from clients (view by id, send-back): a field inside a record, or the
    end-of-segment marker, is not a record, whatever its bytes say."""
    results = [store.put("T", 0, build_record("T", 0, _body(i)), 0) for i in range(60)]
    first = results[0]
    # 12 bytes in: the QUEUEID field (0), read as a TOTALSIZE of 0
    assert store.read_at(first.commit_log_offset + 12) is None
    # the end-of-segment marker after the last record of the first segment
    in_first = [r for r in results if r.end_offset <= 4096]
    marker = in_first[-1].end_offset
    assert marker < 4096 and store.read_at(marker) is None
    assert store.read_at(marker, 8) is None
    assert decode_record(store.read_at(results[-1].commit_log_offset)).body == _body(59)
